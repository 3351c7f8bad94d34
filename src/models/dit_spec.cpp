// DitSpec: DiT's sizes as the generic seams want them. The weight counts
// follow the tensors DitTransformer::load reads (diffusers' layout: one
// timestep embedder and class table per block), split the way it splits
// them under tp.
#include "models/dit_spec.h"

#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr double kAdaLnChunks = 6;     // adaLN-Zero: shift, scale, gate for attention and MLP
constexpr double kTimestepChannels = 256;

// Per block: what tensor parallelism splits (QKV and MLP-in by output rows,
// out-projection and MLP-out by input columns, each adaLN chunk by rows).
double block_split(const DitConfig& c) {
  const double d = c.inner_dim(), f = c.ff_inner_dim, k = kAdaLnChunks;
  return (3 * d * d + 3 * d)     // QKV
         + d * d                 // out projection weight
         + (d * f + f)           // MLP in
         + f * d                 // MLP out weight
         + (k * d * d + k * d);  // adaLN modulation
}

// Per block: the timestep embedder and class table (diffusers: one per block).
double block_embedder(const DitConfig& c) {
  const double d = c.inner_dim();
  return (kTimestepChannels * d + d + d * d + d) + (c.num_classes + 1) * d;
}

// Per block, held whole besides the embedder: the biases added after the
// tp all-reduce.
double block_row_biases(const DitConfig& c) { return 2.0 * c.inner_dim(); }

// Once per model, held whole, excluding pos_embed.
double model_once(const DitConfig& c) {
  const double d = c.inner_dim(), pa = static_cast<double>(c.patch_size) * c.patch_size;
  return (d * c.in_channels * pa + d)                      // patch embedding
         + (2 * d * d + 2 * d)                             // final adaLN
         + (pa * c.out_channels * d + pa * c.out_channels);  // final projection
}

// The generic Transformer over a DitTransformer.
class DitModel final : public Transformer {
 public:
  explicit DitModel(DitTransformer impl) : impl_(std::move(impl)) {}
  Tensor forward(const ForwardArgs& a) const override {
    return impl_.forward(*a.latents, a.timesteps, a.class_labels, a.pab, a.stale_kv);
  }

 private:
  DitTransformer impl_;
};

}  // namespace

Shape DitSpec::latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                            const std::string& where) const {
  reject_frames(frames, family(), where);
  const int64_t s = cfg_.sample_size, size = s * vae_factor;
  if ((height && height != size) || (width && width != size))
    throw ConfigError(where + ".height/width: this DiT model generates " + std::to_string(size) + "x" +
                      std::to_string(size) +
                      " only (sample_size " + std::to_string(s) + " x VAE factor " + std::to_string(vae_factor) + ")");
  return {cfg_.in_channels, s, s};
}

parallel::Workload DitSpec::workload(const Shape& latent) const {
  const DitConfig& c = cfg_;
  const int64_t d = c.inner_dim(), hw = latent.at(1) * latent.at(2);
  parallel::Workload w;
  w.heads = c.num_heads;
  w.head_dim = c.head_dim;
  w.layers = c.num_layers;
  w.tokens = c.grid() * c.grid();
  w.mlp_hidden = c.ff_inner_dim;
  // Per layer: self-attention over the image's tokens and one MLP.
  w.attention = {parallel::AttentionOp::spatial(w.tokens, c.num_heads)};
  w.feed_forwards = 1;
  w.gathered_per_layer = static_cast<int64_t>(kAdaLnChunks) * d;  // the adaLN modulation (B, 6D)
  w.output_per_token = c.patch_size * c.patch_size * c.out_channels;
  w.input_elements = c.in_channels * hw;
  w.output_elements = c.out_channels * hw;
  w.eps_elements = c.in_channels * hw;
  w.split_per_layer = block_split(c);
  w.whole_per_layer = block_row_biases(c) + block_embedder(c);
  w.whole_once = model_once(c) + static_cast<double>(w.tokens) * d;  // + the pos_embed table ditgen keeps
  return w;
}

std::unique_ptr<Transformer> DitSpec::load(const io::WeightStore& weights, const ShardGroups& g,
                                           const Placement& place) const {
  return std::make_unique<DitModel>(DitTransformer::load(weights, cfg_, g, place));
}

std::unique_ptr<TransformerSpec> make_dit_spec(const nlohmann::json& cfg, const std::string& path) {
  return std::make_unique<DitSpec>(DitConfig::from_json(cfg, path));
}

int64_t dit_param_count(const DitConfig& c, bool embedders_per_block) {
  const double n = c.num_layers * (block_split(c) + block_row_biases(c)) +
                   (embedders_per_block ? c.num_layers : 1) * block_embedder(c) + model_once(c);
  return static_cast<int64_t>(n);
}

}  // namespace ditgen::models
