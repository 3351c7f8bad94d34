// The CogVideoX family's registry entry: CogVideoXConfig is
// transformer/config.json (diffusers' CogVideoXTransformer3DModel) parsed
// once; CogVideoXSpec answers what the CLI, `plan`, preflight and PAB setup
// ask of a transformer (models/transformer.h) from it alone, and its load()
// makes a CogVideoXTransformer (models/cogvideox.h) behind the generic
// Transformer interface. Its Workload lists one attention per layer over
// the text and every frame's tokens at once (spatio-temporal, the text
// joined), so the layout rules shard that joint sequence under ulysses and
// ring and refuse dsp.
#pragma once
#include <cstdint>
#include <string>

#include "models/cogvideox.h"
#include "models/family_spec.h"
#include "models/transformer.h"

namespace ditgen::models {

class CogVideoXSpec final : public FamilySpec<CogVideoXConfig, CogVideoXTransformer> {
 public:
  // Blocks: the joint self-attention (PAB spatial) and the feed-forward.
  explicit CogVideoXSpec(CogVideoXConfig cfg)
      : FamilySpec(std::move(cfg), {"cogvideox", Conditioning::kText, {pab::Kind::kSpatial, pab::Kind::kMlp}}) {}

  int64_t caption_channels() const override { return cfg_.text_dim; }
  // CogVideoXPipeline: every row of each text (the encoder's, unmasked:
  // the text stage's rules, models::pipeline_text_rules), 226 rows by
  // default; a sin-cos model (2b) takes exactly max_text_seq_length rows
  // (its position table has that many text rows). Latents are unscaled as
  // 1 / scaling_factor * latents.
  TextPipelineRules text_pipeline_rules() const override;
  // TeaCache4CogVideoX's coefficients (its signal: the time embedding) for
  // CogVideoX-2b and -5b, matched by their sizes.
  std::vector<double> teacache_coefficients() const override;
  // CogVideoXPipeline's call: 50 steps, guidance 6; MP4s at 8 fps, as its
  // examples export them (export_to_video(video, fps=8)).
  RunDefaults run_defaults() const override { return {50, 6.0, 8.0}; }
  // (C, F', h, w): height and width multiples of the VAE's factor x patch
  // (default sample_height x sample_width latents: 480 x 720), frames the
  // VAE can make (default sample_frames, 49).
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                     const std::string& where) const override;
  // A video of F' latent frames of h*w/p^2 tokens, the text joined to it;
  // per layer the joint attention and one MLP (two tp all-reduces); each
  // block's (6D, T) modulation gathered over tp twice.
  parallel::Workload workload(const Shape& latent) const override;
};

// Parameters of a CogVideoX transformer.
inline int64_t cogvideox_param_count(const CogVideoXConfig& cfg) {
  return layered_param_count<CogVideoXTransformer>(cfg);
}

}  // namespace ditgen::models
