// Parallel layouts on CUDA under mpirun (docs/design.md §4): one GPU per rank
// (the node-local rank), tp and sp groups over NCCL, the CFG pair over MPI.
// Each layout runs the ditgen executable (--device cuda, model.dtype
// float32) on the dit_odd fixture (5x5 tokens, 12 heads: uneven shards)
// with diffusers' initial noise, as tests/cli/test_layouts.cpp does on the
// CPU, and its saved latents must equal the single-GPU run's (relative L2
// < 1e-4: float32 without TF32; only the summation order of the sharded
// GEMMs, the all-reduces and the ring merge differs) and stay within the
// CPU test's 1e-4 of diffusers' reference.
// A layout needs one visible GPU per rank; with fewer, the test skips
// (gpu_skip.h: ctest reports it as skipped, not passed).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "gpu/gpu_skip.h"
#include "io/safetensors.h"
#include "models/fixture.h"
#include "ops/backend.h"
#include "ops/test_helpers.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

// False (after skipping: gpu_skip.h) when fewer than `ranks` GPUs are visible.
bool have_gpus(int ranks) {
  const int visible = ops::cuda_device_count();
  if (visible >= ranks) return true;
  gputest::skip_test("needs " + std::to_string(ranks) + " GPUs, " + std::to_string(visible) + " visible");
  return false;
}

using testing::Run;
using testing::run_command;

// mpirun --timeout ends a hung job with all its ranks (NCCL hangs rather
// than fails when a peer is gone).
std::string mpirun(int ranks) {
  return std::string(DITGEN_MPIEXEC) + " --oversubscribe --timeout 240 -np " + std::to_string(ranks) +
         " -x OMP_NUM_THREADS=1 ";
}

// The fixture's DDIM run (6 steps, CFG 4) on CUDA float32 from diffusers'
// noise; returns the saved latents.
Tensor run_fixture(const testing::TempDir& dir, const std::string& name, int ranks, const std::string& sets) {
  const std::string fixture = testing::fixture_dir("dit_odd");
  const std::string latents = dir.file(name + ".safetensors");
  const std::string cmd = (ranks > 1 ? mpirun(ranks) : std::string()) + DITGEN_EXE +
                          " --device cuda --set model.dtype=float32 --config " + fixture +
                          "/reference/run_ddim.json --set model.path=" + fixture + " --init-noise " + fixture +
                          "/reference/noise.safetensors --save-latents " + latents + " --output " +
                          dir.file(name + "/img.png") + " --quiet --threads 1 " + sets;
  const Run r = run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
  MESSAGE(name << ": " << r.seconds << " s");
  return io::SafetensorsFile::open(latents)->load("latents").to(DType::kF32).clone();
}

void check_layout(int ranks, const std::string& sets) {
  if (!have_gpus(ranks)) return;
  testing::TempDir dir("ditgen_layout_cuda");
  const Tensor single = run_fixture(dir, "single", 1, "");
  const Tensor parallel = run_fixture(dir, "parallel", ranks, sets);
  const Tensor ref = testing::fixture_tensor("dit_odd", "expected.safetensors", "ddim_latents");
  REQUIRE(parallel.shape() == single.shape());
  const double err = testing::rel_l2(parallel, single), vs_ref = testing::rel_l2(parallel, ref);
  MESSAGE(sets << " on " << ranks << " GPUs: relative L2 vs single GPU " << err << ", vs diffusers " << vs_ref
               << " (single GPU vs diffusers " << testing::rel_l2(single, ref) << ")");
  CHECK(err < 1e-4);
  CHECK(vs_ref < 1e-4);
}

}  // namespace

TEST_CASE("cuda layout sp2 ulysses (NCCL)") { check_layout(2, "--set parallel.sp=2"); }
TEST_CASE("cuda layout sp2 ring (NCCL)") { check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring"); }
TEST_CASE("cuda layout tp2 (NCCL)") { check_layout(2, "--set parallel.tp=2"); }
TEST_CASE("cuda layout cp2") { check_layout(2, "--set parallel.cp=2"); }
TEST_CASE("cuda layout sp2 x tp2 (NCCL, 4 ranks)") { check_layout(4, "--set parallel.sp=2 --set parallel.tp=2"); }
// PipeFusion's stage hops are NCCL send/recv; a warm-up over all 6 steps is synchronous.
TEST_CASE("cuda layout pp2 PipeFusion (NCCL send/recv)") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=6");
}
