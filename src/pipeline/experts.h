// The transformer(s) a pipeline denoises with. One for every model but Wan
// 2.2 A14B, whose model_index.json names two experts (diffusers'
// WanPipeline): `transformer` for the high-noise timesteps t >= boundary_ratio
// x num_train_timesteps, `transformer_2` (its own config and weights) below,
// guided with guidance_scale_2. An expert is loaded when a step first needs
// it, the one held released first, so one expert's weights are in memory at
// a time (two 14B experts in bfloat16 do not fit 24 GiB); a second batch of
// outputs starts at high noise again and reloads the first.
#pragma once
#include <memory>
#include <string>

#include "models/placement.h"
#include "models/shard_groups.h"
#include "models/transformer.h"

namespace ditgen::pipeline {

struct ModelParts;

class Experts {
 public:
  static constexpr int kHighNoise = 0, kLowNoise = 1;

  Experts() = default;
  // The parts' experts (ModelParts::read has read and checked their
  // configs). The parts must outlive this object.
  explicit Experts(const ModelParts& parts) : parts_(&parts) {}

  bool two() const;
  // Which expert the step at `timestep` takes.
  int expert_for(double timestep) const;

  // Where experts load; loads the high-noise one (the first step's).
  void load(const models::ShardGroups& shard, const models::Placement& place);
  bool loaded() const { return static_cast<bool>(held_); }
  // Expert `which`, loaded now if the other is held (released first).
  const models::Transformer& get(int which) const;

 private:
  const ModelParts* parts_ = nullptr;
  models::ShardGroups shard_;
  models::Placement place_;
  // A const denoise may swap the expert held.
  mutable std::shared_ptr<models::Transformer> held_;
  mutable int held_index_ = -1;
};

}  // namespace ditgen::pipeline
