// What the layout suites (test_layouts.cpp, test_video_layouts.cpp,
// test_wan_cli.cpp) check of a run under mpirun against the single
// process: docs/parallel.md's promise per layout, how many elements differ,
// and rank 0's bytes per step (DITGEN_TEST_COMM_STATS) to compare with
// `plan`'s, and the bytes PAB's reuses skipped (--pab-stats) against
// `plan`'s per-branch figures.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "parallel/layout.h"
#include "parallel/plan.h"
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

// --pab-stats' "kinds": each named kind ("spatial", "temporal", "cross",
// "mlp") reused, and skipped exactly its reuses x plan's bytes per branch.
inline void check_pab_skipped_bytes(const nlohmann::json& kinds, const parallel::PlanRow& plan,
                                    std::initializer_list<const char*> names) {
  for (const std::string kind : names) {
    CAPTURE(kind);
    const double per_branch = kind == "spatial"    ? plan.branch_spatial
                              : kind == "temporal" ? plan.branch_temporal
                              : kind == "cross"    ? plan.branch_cross
                                                   : plan.branch_mlp;
    const double reused = kinds[kind]["reused"].get<double>();
    const double skipped = kinds[kind]["comm_bytes_skipped"].get<double>();
    MESSAGE("  " << kind << ": reused " << reused << ", skipped " << skipped << " bytes, plan per branch "
                 << per_branch);
    CHECK(reused > 0);
    CHECK(skipped == reused * per_branch);
  }
}

}  // namespace ditgen::testing
