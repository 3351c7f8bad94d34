// CogVideoXSpec: CogVideoX's sizes as the generic seams want them. The latent
// shape follows CogVideoXPipeline (height and width multiples of the VAE's
// factor x patch, frames through the VAE's temporal factor), the Workload
// the tensors CogVideoXTransformer declares.
#include "models/cogvideox_spec.h"

#include "models/registry.h"  // pipeline_text_rules
#include "util/error.h"

namespace ditgen::models {

TextPipelineRules CogVideoXSpec::text_pipeline_rules() const {
  TextPipelineRules r = pipeline_text_rules("CogVideoXPipeline");
  r.fixed_max_length = cfg_.rotary ? 0 : cfg_.max_text_seq_length;
  r.fixed_max_length_key = cfg_.rotary ? nullptr : "max_text_seq_length";
  return r;
}

Shape CogVideoXSpec::latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                                  const std::string& where) const {
  const auto [h, w] = models::latent_size(height, width, cfg_.sample_height * vae.spatial,
                                          cfg_.sample_width * vae.spatial, vae.spatial, cfg_.patch_size, where);
  const int64_t f = frames ? frames : cfg_.sample_frames;
  vae.check_frames(f, where + ".frames");
  return {cfg_.in_channels, vae.latent_frames_of(f), h, w};
}

parallel::Workload CogVideoXSpec::workload(const Shape& latent) const {
  // Per layer: one attention over the text and every frame's tokens, one
  // MLP; the text's length is the run's (Workload::set_text_tokens).
  parallel::Workload w = sized(latent, {parallel::AttentionKind::kSpatioTemporal}, 1);
  w.text_joined = true;
  w.gathered_per_layer = 2 * nn::kModulationChunks * cfg_.inner_dim();  // norm1's and norm2's (B, 6D)
  return w;
}

std::vector<double> CogVideoXSpec::teacache_coefficients() const {
  // ali-vilab/TeaCache 7c10efc, eval/teacache/experiments/cogvideox.py:75 (CogVideoX-2B: sin-cos
  // positions) and :78 (CogVideoX-5B: rotary); the signal is the time embedding.
  if (!cfg_.rotary && cfg_.num_layers == 30 && cfg_.inner_dim() == 1920)
    return {-3.10658903e+01, 2.54732368e+01, -5.92380459e+00, 1.75769064e+00, -3.61568434e-03};
  if (cfg_.rotary && cfg_.num_layers == 42 && cfg_.inner_dim() == 3072)
    return {-1.53880483e+03, 8.43202495e+02, -1.34363087e+02, 7.97131516e+00, -5.23162339e-02};
  return {};
}

}  // namespace ditgen::models
