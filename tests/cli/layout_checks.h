// What the layout suites (test_layouts.cpp, test_video_layouts.cpp,
// test_wan_cli.cpp) check of a run under mpirun against the single
// process: docs/parallel.md's promise per layout, how many elements differ,
// and rank 0's bytes per step (DITGEN_TEST_COMM_STATS) to compare with
// `plan`'s.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "parallel/layout.h"
#include "tensor/tensor.h"

namespace ditgen::testing {

// What docs/parallel.md promises a layout (issue 36 item 8): where every
// rank computes whole rows of every sum (cp, Ulysses and dsp sp, their
// combinations, PipeFusion with a full warm-up) the single process's
// latents bit for bit; where a sum is split (ring, tp) within float
// rounding, relative L2 < 1e-5.
inline bool promises_identical(const parallel::Layout& layout) {
  return layout.tp == 1 && (layout.sp == 1 || layout.sp_mode == parallel::SpMode::kUlysses ||
                            layout.sp_mode == parallel::SpMode::kDsp);
}

// The number of elements that differ at all.
inline int64_t differing(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += a[i] != b[i];
  return n;
}

// Rank 0's bytes per forward over every group (DITGEN_TEST_COMM_STATS).
inline double sent_per_step(const nlohmann::json& sent) {
  return (sent["tp"].get<double>() + sent["sp"].get<double>() + sent["cp"].get<double>() + sent["pp"].get<double>()) /
         sent["forwards"].get<double>();
}

}  // namespace ditgen::testing
