// PixArtConfig from config.json, as PixArtTransformer2DModel.__init__ reads
// it (sizes always from the file, never the XL defaults), and PixArtSpec:
// PixArt's sizes as the generic seams want them. The weight counts follow
// the tensors PixArtTransformer::load reads, split the way it splits them
// under tp (the shared adaln_single, the embedders and the caption
// projection are held whole on every rank).
#include "models/pixart_spec.h"

#include <algorithm>

#include "io/model_dir.h"
#include "models/pixart.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr double kTimestepChannels = 256;

// Per block: what tensor parallelism splits (self- and cross-attention q/k/v
// and MLP-in by output rows, their output projections and MLP-out by input
// columns).
double block_split(const PixArtConfig& c) {
  const double d = c.inner_dim(), f = c.ff_inner_dim;
  return 2 * ((3 * d * d + 3 * d) + d * d)  // attn1 and attn2 (cross_attention_dim = D)
         + (d * f + f) + f * d;             // MLP in, MLP out weight
}

// Per block, held whole: the biases added after the tp all-reduces and the
// block's scale_shift_table.
double block_whole(const PixArtConfig& c) { return 3.0 * c.inner_dim() + 6.0 * c.inner_dim(); }

// A TimestepEmbedding of width w.
double embedder(double w) { return kTimestepChannels * w + w + w * w + w; }

// Once per model, held whole, excluding the position table.
double model_once(const PixArtConfig& c) {
  const double d = c.inner_dim(), pa = static_cast<double>(c.patch_size) * c.patch_size;
  return (d * c.in_channels * pa + d)                                  // patch embedding
         + embedder(d)                                                 // timestep embedder
         + (c.use_additional_conditions ? 2 * embedder(static_cast<double>(c.inner_dim() / 3)) : 0)  // micro-conditions
         + (6 * d * d + 6 * d)                                         // adaln_single.linear
         + (c.caption_channels * d + d + d * d + d)                    // caption projection
         + 2 * d                                                       // final scale_shift_table
         + (pa * c.out_channels * d + pa * c.out_channels);            // proj_out
}

// The generic Transformer over a PixArtTransformer.
class PixArtModel final : public Transformer {
 public:
  explicit PixArtModel(PixArtTransformer impl) : impl_(std::move(impl)) {}
  Tensor forward(const ForwardArgs& a) const override { return impl_.forward(a); }

 private:
  PixArtTransformer impl_;
};

}  // namespace

PixArtConfig PixArtConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "ada_norm_single", path);
  require(cls == "PixArtTransformer2DModel" || (cls == "Transformer2DModel" && norm_type == "ada_norm_single"), path,
          "_class_name: expected PixArtTransformer2DModel (or Transformer2DModel with norm_type ada_norm_single), "
          "got '" + cls + "' with norm_type '" + norm_type + "'");
  require(norm_type == "ada_norm_single", path, "norm_type: expected ada_norm_single, got '" + norm_type + "'");
  PixArtConfig c;
  static_cast<AdaSingleConfig&>(c) = read_ada_single_sizes(cfg, path, "PixArt");
  const int64_t d = c.inner_dim();
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-6, path));
  // diffusers: config.interpolation_scale, or max(sample_size // 64, 1) when null.
  const double default_scale = static_cast<double>(std::max<int64_t>(c.sample_size / 64, 1));
  c.interpolation_scale = io::get_number_or(cfg, "interpolation_scale", default_scale, path);
  require(c.interpolation_scale > 0, path,
          "interpolation_scale: expected a positive number, got " + std::to_string(c.interpolation_scale));
  // diffusers: null means sample_size == 128 (the 1024 models).
  c.use_additional_conditions = io::get_bool_or(cfg, "use_additional_conditions", c.sample_size == 128, path);
  require(!c.use_additional_conditions || d % 3 == 0, path,
          "use_additional_conditions: the resolution and aspect-ratio embeddings are D/3 wide each, but "
          "num_attention_heads * attention_head_dim = " + std::to_string(d) + " is not divisible by 3");

  // PixArtTransformer2DModel's defaults are the published block.
  check_ada_single_options(cfg, path, "PixArt", {"gelu-approximate", false, true});
  const std::string attention_type = io::get_string_or(cfg, "attention_type", "default", path);
  require(attention_type == "default", path, "attention_type: not supported yet: '" + attention_type + "'");
  // Legacy Transformer2DModel keys that would make it another model.
  for (const char* key : {"only_cross_attention", "double_self_attention"})
    require(!io::get_bool_or(cfg, key, false, path), path, std::string(key) + ": not supported yet: true");
  require(!cfg.contains("num_vector_embeds") || cfg["num_vector_embeds"].is_null(), path,
          "num_vector_embeds: not supported yet (discrete inputs; PixArt takes latents)");
  return c;
}

Shape PixArtSpec::latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                               const std::string& where) const {
  reject_frames(frames, family(), where);
  const auto [h, w] = cfg_.latent_size(height, width, vae_factor, where);
  return {cfg_.in_channels, h, w};
}

parallel::Workload PixArtSpec::workload(const Shape& latent) const {
  const PixArtConfig& c = cfg_;
  const int64_t d = c.inner_dim(), hw = latent.at(1) * latent.at(2), base = c.base_grid();
  parallel::Workload w;
  w.heads = c.num_heads;
  w.head_dim = c.head_dim;
  w.layers = c.num_layers;
  w.tokens = (latent.at(1) / c.patch_size) * (latent.at(2) / c.patch_size);
  w.mlp_hidden = c.ff_inner_dim;
  w.gathered_per_layer = 0;       // adaln_single is held whole: nothing gathered over tp
  // Per layer: self-attention over the image's tokens, cross-attention to the text, one MLP.
  w.attention = {parallel::AttentionOp::spatial(w.tokens, c.num_heads), parallel::AttentionOp::cross(0, c.num_heads)};
  w.feed_forwards = 1;
  w.output_per_token = c.patch_size * c.patch_size * c.out_channels;
  w.input_elements = c.in_channels * hw;
  w.output_elements = c.out_channels * hw;
  w.eps_elements = c.in_channels * hw;
  w.split_per_layer = block_split(c);
  w.whole_per_layer = block_whole(c);
  w.whole_once = model_once(c) + static_cast<double>(base * base) * d;  // + the native position table kept
  return w;
}

std::unique_ptr<Transformer> PixArtSpec::load(const io::WeightStore& weights, const ShardGroups& g,
                                              const Placement& place) const {
  return std::make_unique<PixArtModel>(PixArtTransformer::load(weights, cfg_, g, place));
}

std::unique_ptr<TransformerSpec> make_pixart_spec(const nlohmann::json& cfg, const std::string& path) {
  return std::make_unique<PixArtSpec>(PixArtConfig::from_json(cfg, path));
}

int64_t pixart_param_count(const PixArtConfig& c) {
  return static_cast<int64_t>(c.num_layers * (block_split(c) + block_whole(c)) + model_once(c));
}

}  // namespace ditgen::models
