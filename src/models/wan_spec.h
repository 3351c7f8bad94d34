// The Wan family's registry entry: WanConfig is transformer/config.json
// (diffusers' WanTransformer3DModel) parsed once; WanSpec answers what the
// CLI, `plan`, preflight and PAB setup ask of a transformer
// (models/transformer.h) from it alone, and its load() makes a
// WanTransformer (models/wan.h) behind the generic Transformer interface.
// Its Workload lists one self-attention over every frame's tokens at once
// (spatio-temporal) and a cross-attention per layer, so the layout rules
// shard the whole video's tokens under ulysses and ring and refuse dsp.
#pragma once
#include <cstdint>
#include <string>

#include "models/family_spec.h"
#include "models/transformer.h"
#include "models/wan.h"

namespace ditgen::models {

class WanSpec final : public FamilySpec<WanConfig, WanTransformer> {
 public:
  // Blocks: self-attention over all tokens (PAB spatial), cross-attention, feed-forward.
  explicit WanSpec(WanConfig cfg)
      : FamilySpec(std::move(cfg), {"wan", Conditioning::kText, {pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}}) {}

  int64_t caption_channels() const override { return cfg_.text_dim; }
  // WanPipeline feeds all max_sequence_length rows (zeros past each text's
  // tokens) to the cross-attention; latents are un-normalised per channel
  // by the VAE's mean and std (the scaling-factor rule does not apply).
  TextPipelineRules text_pipeline_rules() const override { return {}; }
  // WanPipeline runs the transformer under cache_context("cond") and
  // cache_context("uncond"), one call per half.
  bool cfg_halves_cached_apart() const override { return true; }
  // TeaCache4Wan2.1's (use_ret_steps off) for Wan2.1-T2V-1.3B and -14B.
  std::vector<double> teacache_coefficients() const override;
  // WanPipeline's call: 50 steps, guidance 5.0; MP4s at 16 fps, as its
  // examples export them (export_to_video(..., fps=16)).
  RunDefaults run_defaults() const override { return {50, 5.0, 16.0}; }
  // wan_single_file_naming().
  SingleFileNaming single_file_naming() const override;
  // (C, F', h, w): height and width multiples of the VAE's factor x patch
  // (default 480 x 832, WanPipeline's), frames 1 + 4k for Wan's VAE
  // (default 81) -> F' = (F - 1) / 4 + 1 latent frames.
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                     const std::string& where) const override;
  // A video of F' latent frames of h*w/4 tokens; per layer the
  // spatio-temporal self-attention, the cross-attention and one MLP
  // (three tp all-reduces).
  parallel::Workload workload(const Shape& latent) const override;

  // The image tokens an image_dim model's cross-attention attends besides
  // the text: CLIP ViT-H/14's 257 (256 patches and the class token) for
  // one image, pos_embed_seq_len (2 x 257) for first-last-frame; 0 without
  // image_dim.
  int64_t image_tokens() const {
    return cfg_.image_dim == 0 ? 0 : cfg_.pos_embed_seq_len > 0 ? cfg_.pos_embed_seq_len : kClipImageTokens;
  }

  // WanPipeline's defaults.
  static constexpr int64_t kDefaultHeight = 480, kDefaultWidth = 832, kDefaultFrames = 81;
  static constexpr int64_t kClipImageTokens = 257;
};

// The original Wan release's names (ComfyUI's and city96's GGUF files:
// blocks.N.self_attn.q.weight ...), mapped as diffusers'
// convert_wan_transformer_to_diffusers does (io/wan_names.h), both ways;
// GGUF files of general.architecture "wan"; ComfyUI's scaled float8 scales
// renamed with their weights.
SingleFileNaming wan_single_file_naming();

// Parameters of a Wan transformer (the rotary tables are buffers, not counted).
inline int64_t wan_param_count(const WanConfig& cfg) { return layered_param_count<WanTransformer>(cfg); }

}  // namespace ditgen::models
