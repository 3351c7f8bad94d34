// plan's FLOPs per step (parallel/step_cost.h) against the DiT paper's own
// count: DiT-XL/2 at 256 x 256 (256 tokens, 28 blocks of 16 heads x 72,
// MLP 4608) is 118.6 GFLOPs per forward in Peebles & Xie, Table 4, fvcore's
// count of multiply-adds (one per fused multiply-add); the blocks' GEMMs and
// attention, which step_cost counts, are all but the embedders', adaLN's
// and the final layer's share of it. tp splits the work evenly; the bytes
// are the rank's weights, its activations twice per layer and what it sends.
#include <doctest/doctest.h>

#include "parallel/plan.h"
#include "parallel/step_cost.h"

using namespace ditgen;
using namespace ditgen::parallel;

namespace {

Workload dit_xl_2_256() {
  Workload w;
  w.heads = 16;
  w.head_dim = 72;
  w.layers = 28;
  w.tokens = 256;
  w.mlp_hidden = 4608;
  w.split_per_layer = 12.0 * 1152 * 1152;  // the block's matrices (adaLN's 6 D^2 included), for the bytes
  w.output_per_token = 2 * 2 * 8;
  w.input_elements = 4 * 32 * 32;
  w.output_elements = 8 * 32 * 32;
  w.eps_elements = 4 * 32 * 32;
  return w;
}

}  // namespace

TEST_CASE("step cost: DiT-XL/2's FLOPs as its paper counts them, split by tp") {
  const Workload w = dit_xl_2_256();
  const PlanRow one = plan_layout(Layout{1, 1, 1, SpMode::kUlysses}, w, 1, false);
  const StepCost c = step_cost(one, w);
  const double macs = c.flops / 2;
  MESSAGE("DiT-XL/2 256: " << macs / 1e9 << " GMACs per forward (paper: 118.6 with the embedders and adaLN)");
  CHECK(macs < 118.6e9);
  CHECK(macs > 118.6e9 * 0.98);
  // Twice the images, twice the work; tp 2 halves each rank's.
  CHECK(step_cost(plan_layout(Layout{1, 1, 1, SpMode::kUlysses}, w, 2, false), w).flops == doctest::Approx(2 * c.flops));
  const PlanRow tp2 = plan_layout(Layout{1, 1, 2, SpMode::kUlysses}, w, 1, false);
  CHECK(step_cost(tp2, w).flops == doctest::Approx(c.flops / 2));
  // Ulysses over 2 ranks: each rank half the tokens' projections and half the heads' attention.
  const PlanRow sp2 = plan_layout(Layout{2, 1, 1, SpMode::kUlysses}, w, 1, false);
  CHECK(step_cost(sp2, w).flops == doctest::Approx(c.flops / 2));
  CHECK(c.bytes == doctest::Approx(one.weight_bytes_per_rank + 2 * 28 * one.activation_bytes_per_rank));
  CHECK(step_cost(sp2, w).bytes ==
        doctest::Approx(sp2.weight_bytes_per_rank + 2 * 28 * sp2.activation_bytes_per_rank +
                        sp2.comm_bytes_per_step_per_rank));
}
