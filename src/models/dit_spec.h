// The DiT family's registry entry: DitSpec answers what the CLI, `plan`,
// preflight and PAB setup ask of a transformer (models/transformer.h) from
// transformer/config.json, parsed once into a DitConfig; its load() makes a
// DitTransformer behind the generic Transformer interface.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/dit.h"
#include "models/family_spec.h"
#include "models/transformer.h"

namespace ditgen::models {

class DitSpec final : public FamilySpec<DitConfig, DitTransformer> {
 public:
  // DiT blocks have one self-attention (spatial) and a feed-forward.
  explicit DitSpec(DitConfig cfg)
      : FamilySpec(std::move(cfg), {"dit", Conditioning::kClassLabels, {pab::Kind::kSpatial, pab::Kind::kMlp}}) {}

  int64_t num_classes() const override { return cfg_.num_classes; }
  // DiT makes its sample_size only (square, fixed: positions are a fixed table).
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                     const std::string& where) const override;
  parallel::Workload workload(const Shape& latent) const override;
};

// Parameters of a DiT (pos_embed excluded). embedders_per_block: diffusers'
// layout, one timestep embedder and class table per block; false: one
// shared (the original DiT repository's count).
int64_t dit_param_count(const DitConfig& cfg, bool embedders_per_block);

}  // namespace ditgen::models
