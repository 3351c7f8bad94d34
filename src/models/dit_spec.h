// The DiT family's registry entry: DitSpec answers what the CLI, `plan`,
// preflight and PAB setup ask of a transformer (models/transformer.h) from
// transformer/config.json, parsed once into a DitConfig; its load() makes a
// DitTransformer behind the generic Transformer interface.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/dit.h"
#include "models/transformer.h"

namespace ditgen::models {

class DitSpec final : public TransformerSpec {
 public:
  explicit DitSpec(DitConfig cfg) : cfg_(std::move(cfg)) {}

  const char* family() const override { return "dit"; }
  Conditioning conditioning() const override { return Conditioning::kClassLabels; }
  // DiT blocks have one self-attention (spatial) and a feed-forward.
  bool has_pab_kind(pab::Kind k) const override { return k == pab::Kind::kSpatial || k == pab::Kind::kMlp; }
  int64_t num_layers() const override { return cfg_.num_layers; }
  int64_t head_dim() const override { return cfg_.head_dim; }
  int64_t in_channels() const override { return cfg_.in_channels; }
  int64_t out_channels() const override { return cfg_.out_channels; }
  int64_t num_classes() const override { return cfg_.num_classes; }
  // DiT makes its sample_size only (square, fixed: positions are a fixed table).
  Shape latent_shape(int64_t height, int64_t width, int64_t frames, int64_t vae_factor,
                     const std::string& where) const override;
  parallel::Workload workload(const Shape& latent) const override;
  std::unique_ptr<Transformer> load(const io::WeightStore& weights, const ShardGroups& shard,
                                    const Placement& place) const override;

  const DitConfig& config() const { return cfg_; }

 private:
  DitConfig cfg_;
};

std::unique_ptr<TransformerSpec> make_dit_spec(const nlohmann::json& cfg, const std::string& path);

// Parameters of a DiT (pos_embed excluded). embedders_per_block: diffusers'
// layout, one timestep embedder and class table per block; false: one
// shared (the original DiT repository's count).
int64_t dit_param_count(const DitConfig& cfg, bool embedders_per_block);

}  // namespace ditgen::models
