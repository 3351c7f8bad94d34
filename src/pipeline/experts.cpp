// See experts.h. The boundary and the second expert's spec are ModelParts'
// (read with the model's other configs, before any weight).
#include "pipeline/experts.h"

#include <stdexcept>

#include "io/safetensors.h"
#include "pipeline/pipeline.h"
#include "tensor/device_memory.h"

namespace ditgen::pipeline {

bool Experts::two() const { return parts_ && parts_->spec_2 != nullptr; }

int Experts::expert_for(double timestep) const {
  return two() && timestep < parts_->boundary_timestep ? kLowNoise : kHighNoise;
}

void Experts::load(const models::ShardGroups& shard, const models::Placement& place) {
  if (!parts_) throw std::logic_error("Experts::load without a model");
  shard_ = shard;
  place_ = place;
  held_.reset();
  held_index_ = -1;
  get(kHighNoise);
}

const models::Transformer& Experts::get(int which) const {
  if (!parts_) throw std::logic_error("Experts::get without a model");
  if (which != held_index_) {
    held_.reset();  // the other expert's memory goes before this one is read
    device_memory::release_cached_host();
    const std::string part = which == kLowNoise ? "transformer_2" : "transformer";
    held_ = parts_->load_transformer(part, shard_, place_);
    held_index_ = which;
  }
  return *held_;
}

}  // namespace ditgen::pipeline
