// PixArt text-to-image under mpirun (docs/design.md §4): cp, sp (Ulysses and
// ring, 25 tokens over uneven shards) and tp layouts of the whole pipeline
// (text stage on every rank, CFG halves split across the cp pair) give
// diffusers' latents from its noise, as the single process does.
#include <doctest/doctest.h>

#include <string>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

Tensor run_pixart(const testing::TempDir& dir, int ranks, const std::string& sets) {
  const std::string fixture = testing::fixture_dir("pixart_tiny");
  const std::string latents = dir.file("latents_" + std::to_string(ranks) + ".safetensors");
  const std::string cmd = std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                          " -x OMP_NUM_THREADS=1 " + DITGEN_EXE + " --device cpu --threads 1 --config " + fixture +
                          "/reference/run_dpm.json --set model.path=" + fixture + " --init-noise " + fixture +
                          "/reference/noise.safetensors --save-latents " + latents + " --output " +
                          dir.file("img.png") + " --quiet " + sets;
  const testing::Run r = testing::run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
  return io::SafetensorsFile::open(latents)->load("latents").clone();
}

void check_layout(int ranks, const std::string& sets) {
  testing::TempDir dir("pixart_layout");
  const Tensor got = run_pixart(dir, ranks, sets);
  const double err = testing::rel_l2(got, testing::fixture_tensor("pixart_tiny", "expected.safetensors", "latents_dpm"));
  MESSAGE(sets << ": relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
}

}  // namespace

TEST_CASE("pixart layout cp2") { check_layout(2, "--set parallel.cp=2"); }
TEST_CASE("pixart layout sp2 ulysses") { check_layout(2, "--set parallel.sp=2"); }
TEST_CASE("pixart layout sp2 ring") { check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring"); }
TEST_CASE("pixart layout tp2") { check_layout(2, "--set parallel.tp=2"); }
// PipeFusion with a warm-up over all 4 steps: synchronous, diffusers' result.
TEST_CASE("pixart layout pp2 PipeFusion, warm-up over every step") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=4");
}
TEST_CASE("pixart layout pp2 x tp2 PipeFusion, 3 patches, warm-up over every step") {
  check_layout(4, "--set parallel.pp=2 --set parallel.tp=2 --set parallel.patches=3 --set parallel.warmup_steps=4");
}
TEST_CASE("pixart layout pp2 x sp2 ulysses PipeFusion, warm-up over every step") {
  check_layout(4, "--set parallel.pp=2 --set parallel.sp=2 --set parallel.warmup_steps=4");
}
TEST_CASE("pixart layout sp2 x cp2") { check_layout(4, "--set parallel.sp=2 --set parallel.cp=2"); }
