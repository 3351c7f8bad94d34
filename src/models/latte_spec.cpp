// LatteConfig from config.json, as LatteTransformer3DModel.__init__ reads
// it (sizes always from the file; a missing key takes diffusers' default,
// which for the block type, activation, norm affinity and attention bias
// is then rejected as "not supported yet": every published Latte config
// sets them), and LatteSpec: Latte's sizes as the generic seams want them.
// The weight counts follow the tensors LatteTransformer::load reads, split
// the way it splits them under tp (adaln_single, the embedders and the
// caption projection are held whole on every rank).
#include "models/latte_spec.h"

#include <algorithm>

#include "io/model_dir.h"
#include "models/latte.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr double kTimestepChannels = 256;

// Per layer: what tensor parallelism splits: the spatial block's self- and
// cross-attention q/k/v by output rows and their output projections by
// input columns, the temporal block's self-attention likewise, and both
// MLPs (in by rows, out by columns).
double layer_split(const LatteConfig& c) {
  const double d = c.inner_dim(), f = c.ff_inner_dim;
  const double attention = (3 * d * d + 3 * d) + d * d;  // q/k/v with biases, output weight
  const double mlp = (d * f + f) + f * d;
  return 3 * attention + 2 * mlp;  // attn1, attn2 (cross_attention_dim = D), temporal attn1; two MLPs
}

// Per layer, held whole: the biases added after the tp all-reduces (three in
// the spatial block, two in the temporal one) and both scale_shift_tables.
double layer_whole(const LatteConfig& c) { return 5.0 * c.inner_dim() + 2 * 6.0 * c.inner_dim(); }

// Once per model, held whole, excluding the position tables.
double model_once(const LatteConfig& c) {
  const double d = c.inner_dim(), pa = static_cast<double>(c.patch_size) * c.patch_size;
  return (d * c.in_channels * pa + d)                            // patch embedding
         + (kTimestepChannels * d + d + d * d + d)               // timestep embedder
         + (6 * d * d + 6 * d)                                   // adaln_single.linear
         + (c.caption_channels * d + d + d * d + d)              // caption projection
         + 2 * d                                                 // final scale_shift_table
         + (pa * c.out_channels * d + pa * c.out_channels);      // proj_out
}

// The generic Transformer over a LatteTransformer.
class LatteModel final : public Transformer {
 public:
  explicit LatteModel(LatteTransformer impl) : impl_(std::move(impl)) {}
  Tensor forward(const ForwardArgs& a) const override { return impl_.forward(a); }

 private:
  LatteTransformer impl_;
};

}  // namespace

LatteConfig LatteConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == "LatteTransformer3DModel", path, "_class_name: expected LatteTransformer3DModel, got '" + cls + "'");
  LatteConfig c;
  static_cast<AdaSingleConfig&>(c) = read_ada_single_sizes(cfg, path, "Latte");
  c.video_length = get_int(cfg, "video_length", path);
  require(c.video_length > 0, path,
          "video_length: expected a positive integer, got " + std::to_string(c.video_length));
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-5, path));  // diffusers' default 1e-5
  // diffusers: max(sample_size // 64, 1), no config key.
  c.interpolation_scale = static_cast<double>(std::max<int64_t>(c.sample_size / 64, 1));

  // diffusers' defaults for these (layer_norm, geglu, affine norms, no
  // attention bias) make another block than Latte's published models use.
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "layer_norm", path);
  require(norm_type == "ada_norm_single", path,
          "norm_type: not supported yet: '" + norm_type + "' (Latte uses ada_norm_single)");
  check_ada_single_options(cfg, path, "Latte", {"geglu", true, false});
  return c;
}

Shape LatteSpec::latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                              const std::string& where) const {
  const auto [h, w] = cfg_.latent_size(height, width, vae_factor, where);
  const int64_t f = frames ? frames : cfg_.video_length;
  if (f < 1)
    throw ConfigError(where + ".frames: " + std::to_string(f) + ": expected at least 1 frame (default " +
                      std::to_string(cfg_.video_length) + ", the model's video_length)");
  return {cfg_.in_channels, f, h, w};
}

parallel::Workload LatteSpec::workload(const Shape& latent) const {
  const LatteConfig& c = cfg_;
  const int64_t d = c.inner_dim(), frames = latent.at(1), hw = latent.at(2) * latent.at(3), base = c.base_grid();
  parallel::Workload w;
  w.heads = c.num_heads;
  w.head_dim = c.head_dim;
  w.layers = c.num_layers;
  w.tokens = (latent.at(2) / c.patch_size) * (latent.at(3) / c.patch_size);  // per frame
  w.frames = frames;
  // Per layer: the spatial block's self-attention over each frame's tokens,
  // its cross-attention to the text and MLP, then the temporal block's
  // self-attention over each token's frames and MLP (5 tp all-reduces).
  w.attention = {parallel::AttentionOp::spatial(w.tokens, c.num_heads), parallel::AttentionOp::cross(0, c.num_heads),
                 parallel::AttentionOp::temporal(frames, c.num_heads)};
  w.feed_forwards = 2;
  w.mlp_hidden = c.ff_inner_dim;
  w.gathered_per_layer = 0;        // adaln_single is held whole: nothing gathered over tp
  w.output_per_token = c.patch_size * c.patch_size * c.out_channels;
  w.input_elements = c.in_channels * frames * hw;
  w.output_elements = c.out_channels * frames * hw;
  w.eps_elements = c.in_channels * frames * hw;
  w.split_per_layer = layer_split(c);
  w.whole_per_layer = layer_whole(c);
  // + the native spatial position table and the temporal one kept.
  w.whole_once = model_once(c) + static_cast<double>(base * base + c.video_length) * d;
  return w;
}

std::unique_ptr<Transformer> LatteSpec::load(const io::WeightStore& weights, const ShardGroups& g,
                                             const Placement& place) const {
  return std::make_unique<LatteModel>(LatteTransformer::load(weights, cfg_, g, place));
}

std::unique_ptr<TransformerSpec> make_latte_spec(const nlohmann::json& cfg, const std::string& path) {
  return std::make_unique<LatteSpec>(LatteConfig::from_json(cfg, path));
}

int64_t latte_param_count(const LatteConfig& c) {
  return static_cast<int64_t>(c.num_layers * (layer_split(c) + layer_whole(c)) + model_once(c));
}

}  // namespace ditgen::models
