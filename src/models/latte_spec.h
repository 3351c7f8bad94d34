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

#include "models/ada_single_config.h"
#include "models/transformer.h"

namespace ditgen::models {

struct LatteConfig : AdaSingleConfig {  // num_layers: spatial blocks; as many temporal blocks
  int64_t video_length = 0;  // the frames the model was trained on (temp_pos_embed's rows)
  // interpolation_scale is max(sample_size // 64, 1): diffusers has no key for it.

  // Reads transformer/config.json. ModelError naming `path` and the key for
  // anything missing, mistyped or unsupported (cross_attention_dim other
  // than the inner dimension, another activation, norm or attention type).
  static LatteConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class LatteSpec final : public TransformerSpec {
 public:
  explicit LatteSpec(LatteConfig cfg) : cfg_(std::move(cfg)) {}

  const char* family() const override { return "latte"; }
  Conditioning conditioning() const override { return Conditioning::kText; }
  // Spatial blocks: self-attention (spatial), cross-attention, feed-forward;
  // temporal blocks: self-attention across frames (temporal), feed-forward.
  bool has_pab_kind(pab::Kind) const override { return true; }
  int64_t num_layers() const override { return cfg_.num_layers; }
  int64_t head_dim() const override { return cfg_.head_dim; }
  int64_t in_channels() const override { return cfg_.in_channels; }
  int64_t out_channels() const override { return cfg_.out_channels; }
  int64_t caption_channels() const override { return cfg_.caption_channels; }
  // LattePipeline: tokenized to 120, cut to the prompt's k tokens, the
  // negative to the same k rows; decoded from 1 / scaling_factor * latents.
  TextPipelineRules text_pipeline_rules() const override { return {true, kMaxSequenceLength, false}; }
  // (C, F, h, w): height and width as PixArt (multiples of vae_factor *
  // patch_size, default sample_size * vae_factor), frames >= 1, default
  // video_length. Frame counts other than 1 and video_length, which
  // diffusers rejects (its temp_pos_embed is a fixed video_length-row
  // table), get the same 1-D sin-cos rows computed for 0..F-1.
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                     const std::string& where) const override;
  // A video of F frames of N tokens (Workload::frames, tokens); per layer
  // the spatial, cross and temporal attentions and two MLPs (five tp
  // all-reduces).
  parallel::Workload workload(const Shape& latent) const override;
  std::unique_ptr<Transformer> load(const io::WeightStore& weights, const ShardGroups& shard,
                                    const Placement& place) const override;

  const LatteConfig& config() const { return cfg_; }

  // LattePipeline's hard-coded tokenizer length (it has no max_sequence_length).
  static constexpr int64_t kMaxSequenceLength = 120;

 private:
  LatteConfig cfg_;
};

std::unique_ptr<TransformerSpec> make_latte_spec(const nlohmann::json& cfg, const std::string& path);

// Parameters of a Latte transformer (the position tables are buffers, not counted).
int64_t latte_param_count(const LatteConfig& cfg);

}  // namespace ditgen::models
