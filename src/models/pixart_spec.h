// The PixArt family's registry entry: PixArtConfig is transformer/config.json
// (PixArtTransformer2DModel, or the legacy Transformer2DModel with norm_type
// ada_norm_single) parsed once; PixArtSpec answers what the CLI, `plan`,
// preflight and PAB setup ask of a transformer (models/transformer.h) from
// it alone, and its load() makes a PixArtTransformer (models/pixart.h)
// behind the generic Transformer interface.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/ada_single_config.h"
#include "models/transformer.h"

namespace ditgen::models {

struct PixArtConfig : AdaSingleConfig {
  // The 1024 models' resolution / aspect-ratio micro-conditions.
  bool use_additional_conditions = false;

  // Reads transformer/config.json. ModelError naming `path` and the key for
  // anything missing, mistyped or unsupported (cross_attention_dim other
  // than the inner dimension, another activation, norm or attention type).
  static PixArtConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class PixArtSpec final : public TransformerSpec {
 public:
  explicit PixArtSpec(PixArtConfig cfg) : cfg_(std::move(cfg)) {}

  const char* family() const override { return "pixart"; }
  Conditioning conditioning() const override { return Conditioning::kText; }
  // PixArt blocks: self-attention (spatial), cross-attention to the text, feed-forward.
  bool has_pab_kind(pab::Kind k) const override {
    return k == pab::Kind::kSpatial || k == pab::Kind::kCross || k == pab::Kind::kMlp;
  }
  int64_t num_layers() const override { return cfg_.num_layers; }
  int64_t head_dim() const override { return cfg_.head_dim; }
  int64_t in_channels() const override { return cfg_.in_channels; }
  int64_t out_channels() const override { return cfg_.out_channels; }
  int64_t caption_channels() const override { return cfg_.caption_channels; }
  bool micro_conditions() const override { return cfg_.use_additional_conditions; }
  // Any height and width that are multiples of vae_factor * patch_size
  // (positions are computed for the actual grid); 0 = sample_size * vae_factor.
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                     const std::string& where) const override;
  parallel::Workload workload(const Shape& latent) const override;
  std::unique_ptr<Transformer> load(const io::WeightStore& weights, const ShardGroups& shard,
                                    const Placement& place) const override;

  const PixArtConfig& config() const { return cfg_; }

 private:
  PixArtConfig cfg_;
};

std::unique_ptr<TransformerSpec> make_pixart_spec(const nlohmann::json& cfg, const std::string& path);

// Parameters of a PixArt transformer (the position table is a buffer, not counted).
int64_t pixart_param_count(const PixArtConfig& cfg);

}  // namespace ditgen::models
