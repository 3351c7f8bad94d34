// The Wan transformer with image conditioning under parallel layouts
// (docs/design.md §4), run as `mpirun -np N mpi_wan_i2v_layouts`
// (tests/CMakeLists.txt): every sp x tp layout of the N ranks that the
// 4-head fixtures allow (ulysses and ring) reproduces the single-process
// forward and diffusers' output on every rank, for Wan 2.1 I2V (the image
// tokens are context: every rank holds them whole, as the text; the added
// keys' RMSNorm across heads all-reduces its squared sums over tp) and
// TI2V-5B (a timestep per token: each rank modulates its own tokens); rank
// 0 sends exactly the bytes `plan` computes for one forward. On 2 ranks also
// PipeFusion (2 stages, 2 patches) after its warm-up step.
//
// Design as tests/parallel/mpi/: every rank runs the same cases in the same
// order (they are collective) with non-throwing CHECKs only.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "../fixture.h"
#include "../../ops/test_helpers.h"
#include "../../parallel/mpi/mpi_test_main.h"
#include "../wan_i2v_case.h"
#include "sp_tp_layouts.h"
#include "io/model_dir.h"
#include "models/wan.h"
#include "models/wan_spec.h"
#include "parallel/layout.h"
#include "parallel/mpi_runtime.h"
#include "parallel/plan.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

parallel::Communicator& world() { return parallel::MpiRuntime::world(); }

WanConfig config_of(const std::string& variant) {
  const std::string path = testing::wan_i2v_dir(variant) + "/transformer/config.json";
  return WanConfig::from_json(io::read_json_file(path), path);
}

WanTransformer load(const std::string& variant, const ShardGroups& groups) {
  return WanTransformer::load(io::WeightStore::open_dir(testing::wan_i2v_dir(variant) + "/transformer"), config_of(variant), groups);
}

void check_layouts(const std::string& variant) {
  const int rank = world().rank();
  const WanTransformer single = load(variant, {});
  const testing::WanI2vCase c(variant);
  const Tensor whole = single.forward(c.args);
  for (const parallel::Layout& layout : testing::sp_tp_layouts(world().size(), single.config().num_heads)) {
    INFO("rank ", rank, " of ", world().size(), ", ", variant, ", ", layout.str());
    const auto tp_group = parallel::tp_split(layout, rank), sp_group = parallel::sp_split(layout, rank);
    const auto tp = parallel::MpiRuntime::split(world(), tp_group.color, tp_group.key);
    const auto sp = parallel::MpiRuntime::split(world(), sp_group.color, sp_group.key);
    ShardGroups groups;
    groups.tp = tp.get();
    groups.sp = sp.get();
    groups.mode = layout.sp_mode;
    const WanTransformer sharded = load(variant, groups);
    tp->reset_bytes_sent();
    sp->reset_bytes_sent();
    const Tensor parts = sharded.forward(c.args);
    const double sent = static_cast<double>(tp->bytes_sent() + sp->bytes_sent());
    const WanSpec spec(single.config());
    parallel::Workload work =
        spec.workload({c.latents.dim(1), c.latents.dim(2), c.latents.dim(3), c.latents.dim(4)});
    work.set_text_tokens(c.text.dim(1));
    const parallel::PlanRow planned = parallel::plan_layout(layout, work, c.latents.dim(0), false);
    if (rank == 0) CHECK(sent == planned.comm_bytes_per_step_per_rank);
    CHECK(parts.shape() == c.sample.shape());
    const double vs_single = testing::rel_l2(parts, whole), vs_ref = testing::rel_l2(parts, c.sample);
    if (rank == 0)
      MESSAGE(variant << " " << layout.str() << ": relative L2 vs single process " << vs_single << ", vs diffusers "
                      << vs_ref << "; sent " << sent << " bytes, planned " << planned.comm_bytes_per_step_per_rank);
    CHECK(vs_single <= 1e-5);
    CHECK(vs_ref <= 1e-5);
  }
}

// PipeFusion over the 2 ranks as 2 stages of 2 patches: the warm-up step
// and the next (same inputs: the stale keys and values equal fresh ones)
// equal the single-process forward, the image tokens and per-token
// modulation taken patch by patch.
void check_pipefusion(const std::string& variant) {
  if (world().size() != 2) return;
  const WanTransformer single = load(variant, {});
  const testing::WanI2vCase c(variant);
  const Tensor whole = single.forward(c.args);
  const auto pp = parallel::MpiRuntime::split(world(), 0, world().rank());
  ShardGroups groups;
  groups.pp = pp.get();
  groups.pipeline.patches = 2;
  groups.pipeline.warmup_steps = 1;
  const WanTransformer staged = load(variant, groups);
  parallel::StaleKeyValues stale(1);
  ForwardArgs args = c.args;
  args.stale_kv = &stale;
  for (int step = 0; step < 2; ++step) {
    INFO("rank ", world().rank(), ", ", variant, " pp2, step ", step);
    stale.begin_step(step);
    const Tensor out = staged.forward(args);
    const double vs_single = testing::rel_l2(out, whole);
    if (world().rank() == 0) MESSAGE(variant << " pp2 step " << step << ": relative L2 vs single process " << vs_single);
    CHECK(vs_single <= 1e-5);
  }
}

}  // namespace

TEST_CASE("wan i2v PipeFusion pp2 (2 patches) reproduces the single-process forward: I2V and TI2V") {
  check_pipefusion("i2v");
  check_pipefusion("ti2v");
}

TEST_CASE("wan i2v layouts reproduce the single-process forward: 257 image tokens whole on every rank") {
  check_layouts("i2v");
}

TEST_CASE("wan ti2v layouts reproduce the single-process forward: per-token timesteps on each rank's tokens") {
  check_layouts("ti2v");
}

int main(int argc, char** argv) { return testing::run_mpi_doctest(argc, argv, "mpi_wan_i2v_layouts"); }
