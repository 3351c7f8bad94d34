// The Latte family's registry entry: LatteConfig is transformer/config.json
// (diffusers' LatteTransformer3DModel) parsed once; LatteSpec answers what
// the CLI, `plan`, preflight and PAB setup ask of a transformer
// (models/transformer.h) from it alone, and its load() makes a
// LatteTransformer (models/latte.h) behind the generic Transformer
// interface.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/family_spec.h"
#include "models/registry.h"  // pipeline_text_rules
#include "models/latte.h"
#include "models/transformer.h"

namespace ditgen::models {

class LatteSpec final : public FamilySpec<LatteConfig, LatteTransformer> {
 public:
  // Spatial blocks: self-attention (spatial), cross-attention, feed-forward;
  // temporal blocks: self-attention across frames (temporal), feed-forward.
  explicit LatteSpec(LatteConfig cfg)
      : FamilySpec(std::move(cfg), {"latte", Conditioning::kText,
                                    {pab::Kind::kSpatial, pab::Kind::kTemporal, pab::Kind::kCross, pab::Kind::kMlp}}) {}

  int64_t caption_channels() const override { return cfg_.caption_channels; }
  // LattePipeline: tokenized to 120, cut to the prompt's k tokens, the
  // negative to the same k rows; decoded from 1 / scaling_factor * latents.
  TextPipelineRules text_pipeline_rules() const override { return pipeline_text_rules("LattePipeline"); }
  // TeaCache's for Latte-1 (eval/teacache/experiments/latte.py).
  std::vector<double> teacache_coefficients() const override;
  // (C, F, h, w): height and width as PixArt (multiples of vae_factor *
  // patch_size, default sample_size * vae_factor), frames >= 1, default
  // video_length. Frame counts other than 1 and video_length, which
  // diffusers rejects (its temp_pos_embed is a fixed video_length-row
  // table), get the same 1-D sin-cos rows computed for 0..F-1.
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                     const std::string& where) const override;
  // A video of F frames of N tokens (Workload::frames, tokens); per layer
  // the spatial, cross and temporal attentions and two MLPs (five tp
  // all-reduces).
  parallel::Workload workload(const Shape& latent) const override;

  // LattePipeline's hard-coded tokenizer length (it has no max_sequence_length).
  static constexpr int64_t kMaxSequenceLength = 120;

};

// Parameters of a Latte transformer (the position tables are buffers, not counted).
inline int64_t latte_param_count(const LatteConfig& cfg) { return layered_param_count<LatteTransformer>(cfg); }

}  // namespace ditgen::models
