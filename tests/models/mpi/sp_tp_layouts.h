// The layouts the model layout tests run (tests/models/mpi/): every sp x tp
// factorisation of the world that a model of `heads` heads allows, ulysses
// and ring: tp divides the heads, and ulysses needs sp to divide the heads
// per tp rank (cp is the pipeline's, not the model's).
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/layout.h"

namespace ditgen::testing {

inline std::vector<parallel::Layout> sp_tp_layouts(int world_size, int64_t heads) {
  std::vector<parallel::Layout> out;
  for (int tp = 1; tp <= world_size; ++tp) {
    if (world_size % tp || heads % tp) continue;
    const int sp = world_size / tp;
    for (parallel::SpMode mode : {parallel::SpMode::kUlysses, parallel::SpMode::kRing}) {
      if (sp == 1 && mode == parallel::SpMode::kRing) continue;
      if (mode == parallel::SpMode::kUlysses && (heads / tp) % sp) continue;
      out.push_back({sp, 1, tp, mode});
    }
  }
  return out;
}

}  // namespace ditgen::testing
