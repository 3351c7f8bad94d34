// PixArt under parallel layouts (docs/design.md §4), run as `mpirun -np N
// mpi_pixart_layouts` (tests/CMakeLists.txt): every sp x tp layout of the N
// ranks that the 4-head fixtures allow (ulysses and ring; cp is the
// pipeline's, not the model's) reproduces the single-process forward and
// diffusers' output on every rank, for the native 5x5 grid (uneven token
// shards) and the non-square 4x6 one, with masked text and micro-conditions;
// rank 0 sends exactly the bytes `plan` computes for one forward (three tp
// all-reduces per block: self-attention, cross-attention, MLP).
//
// Design as tests/parallel/mpi/: every rank runs the same cases in the same
// order (they are collective) with non-throwing CHECKs only.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "../fixture.h"
#include "../../ops/test_helpers.h"
#include "../../parallel/mpi/mpi_test_main.h"
#include "sp_tp_layouts.h"
#include "io/model_dir.h"
#include "models/pixart.h"
#include "models/pixart_spec.h"
#include "parallel/layout.h"
#include "parallel/plan.h"
#include "parallel/mpi_runtime.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

parallel::Communicator& world() { return parallel::MpiRuntime::world(); }

// The inputs of one reference case ("" or "_8x12"), masks as key counts.
struct Case {
  Tensor latents, text, sample;
  ForwardArgs args;
  Case(const std::string& fixture, const std::string& suffix) {
    auto load = [&](const std::string& name) {
      return testing::fixture_tensor(fixture, "forward.safetensors", name + suffix);
    };
    latents = load("latents");
    text = load("encoder_hidden_states");
    sample = load("sample");
    const Tensor t = load("timestep"), mask = load("encoder_attention_mask");
    args.latents = &latents;
    args.text = &text;
    args.timesteps.assign(t.data(), t.data() + t.numel());
    for (int64_t b = 0; b < mask.dim(0); ++b) {
      int32_t count = 0;
      for (int64_t j = 0; j < mask.dim(1); ++j) count += mask[b * mask.dim(1) + j] != 0.0f;
      args.text_lengths.push_back(count);
    }
    if (fixture == "pixart_1024_tiny") {
      const Tensor res = load("resolution"), ar = load("aspect_ratio");
      for (int64_t b = 0; b < res.dim(0); ++b) {
        args.resolution.push_back({res[2 * b], res[2 * b + 1]});
        args.aspect_ratio.push_back(ar[b]);
      }
    }
  }
};

PixArtTransformer load(const std::string& fixture, const ShardGroups& groups) {
  const std::string dir = testing::fixture_dir(fixture) + "/transformer";
  const PixArtConfig cfg = PixArtConfig::from_json(io::read_json_file(dir + "/config.json"), dir + "/config.json");
  return PixArtTransformer::load(io::WeightStore::open_dir(dir), cfg, groups);
}

void check_layouts(const std::string& fixture) {
  const int rank = world().rank();
  const PixArtTransformer single = load(fixture, {});
  for (const parallel::Layout& layout : testing::sp_tp_layouts(world().size(), single.config().num_heads)) {
    const auto tp_group = parallel::tp_split(layout, rank), sp_group = parallel::sp_split(layout, rank);
    const auto tp = parallel::MpiRuntime::split(world(), tp_group.color, tp_group.key);
    const auto sp = parallel::MpiRuntime::split(world(), sp_group.color, sp_group.key);
    ShardGroups groups;
    groups.tp = tp.get();
    groups.sp = sp.get();
    groups.mode = layout.sp_mode;
    const PixArtTransformer sharded = load(fixture, groups);
    for (const std::string suffix : {"", "_8x12"}) {
      INFO("rank ", rank, " of ", world().size(), ", ", fixture, " sample", suffix, ", ", layout.str());
      const Case c(fixture, suffix);
      const Tensor whole = single.forward(c.args);
      tp->reset_bytes_sent();
      sp->reset_bytes_sent();
      const Tensor parts = sharded.forward(c.args);
      const double sent = static_cast<double>(tp->bytes_sent() + sp->bytes_sent());
      const PixArtSpec spec(single.config());
      const parallel::PlanRow planned = parallel::plan_layout(
          layout, spec.workload({c.latents.dim(1), c.latents.dim(2), c.latents.dim(3)}), c.latents.dim(0), false);
      if (rank == 0) CHECK(sent == planned.comm_bytes_per_step_per_rank);
      CHECK(parts.shape() == c.sample.shape());
      const double vs_single = testing::rel_l2(parts, whole), vs_ref = testing::rel_l2(parts, c.sample);
      if (rank == 0)
        MESSAGE(fixture << " sample" << suffix << " " << layout.str() << ": relative L2 vs single process "
                        << vs_single << ", vs diffusers " << vs_ref << "; sent " << sent << " bytes, planned "
                        << planned.comm_bytes_per_step_per_rank);
      CHECK(vs_single <= 1e-5);
      CHECK(vs_ref <= 1e-5);
    }
  }
}

}  // namespace

TEST_CASE("pixart layouts reproduce the single-process forward: 5x5 and 4x6 grids, masked text") {
  check_layouts("pixart_tiny");
}

TEST_CASE("pixart layouts reproduce the single-process forward: micro-conditions") {
  check_layouts("pixart_1024_tiny");
}

int main(int argc, char** argv) { return testing::run_mpi_doctest(argc, argv, "mpi_pixart_layouts"); }
