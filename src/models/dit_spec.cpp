// DitSpec: DiT's sizes as the generic seams want them. The weight counts
// are those of the tensors DitTransformer declares (diffusers' layout: one
// timestep embedder and class table per block), split as they declare.
#include "models/dit_spec.h"

#include "util/error.h"

namespace ditgen::models {

Shape DitSpec::latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                            const std::string& where) const {
  reject_frames(frames, family(), where);
  const int64_t s = cfg_.sample_size, size = s * vae.spatial;
  if ((height && height != size) || (width && width != size))
    throw ConfigError(where + ".height/width: this DiT model generates " + std::to_string(size) + "x" +
                      std::to_string(size) +
                      " only (sample_size " + std::to_string(s) + " x VAE factor " + std::to_string(vae.spatial) + ")");
  return {cfg_.in_channels, s, s};
}

parallel::Workload DitSpec::workload(const Shape& latent) const {
  // Per layer (diffusers: an embedder per block): self-attention over the
  // image's tokens and one MLP; the adaLN modulation (B, 6D) is gathered
  // over tp; ditgen keeps the pos_embed table.
  parallel::Workload w = sized(latent, {parallel::AttentionKind::kSpatial}, 1);
  w.gathered_per_layer = nn::kModulationChunks * cfg_.inner_dim();
  w.whole_once += static_cast<double>(w.tokens) * cfg_.inner_dim();
  return w;
}

int64_t dit_param_count(const DitConfig& c, bool embedders_per_block) {
  // Layer 0's tensors stand for every layer's.
  const double blocks = c.num_layers * nn::count_elements(DitTransformer::block_tensors(c, 0)).total();
  const double embedders = nn::count_elements(DitTransformer::embedder_tensors(c, 0)).total();
  return static_cast<int64_t>(blocks + (embedders_per_block ? c.num_layers : 1) * embedders +
                              nn::count_elements(DitTransformer::stem_tensors(c)).total());
}

}  // namespace ditgen::models
