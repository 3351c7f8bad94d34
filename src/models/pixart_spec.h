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

#include "models/family_spec.h"
#include "models/pixart.h"
#include "models/transformer.h"

namespace ditgen::models {

class PixArtSpec final : public FamilySpec<PixArtConfig, PixArtTransformer> {
 public:
  // PixArt blocks: self-attention (spatial), cross-attention to the text, feed-forward.
  explicit PixArtSpec(PixArtConfig cfg)
      : FamilySpec(std::move(cfg),
                   {"pixart", Conditioning::kText, {pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}}) {}

  int64_t caption_channels() const override { return cfg_.caption_channels; }
  bool micro_conditions() const override { return cfg_.use_additional_conditions; }
  // Any height and width that are multiples of vae_factor * patch_size
  // (positions are computed for the actual grid); 0 = sample_size * vae_factor.
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                     const std::string& where) const override;
  parallel::Workload workload(const Shape& latent) const override;
};

// Parameters of a PixArt transformer (the position table is a buffer, not counted).
inline int64_t pixart_param_count(const PixArtConfig& cfg) { return layered_param_count<PixArtTransformer>(cfg); }

}  // namespace ditgen::models
