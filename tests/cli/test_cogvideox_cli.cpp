// CogVideoX text-to-video from the command line (tests/fixtures/cogvideox_tiny):
// the fixture's run config with --init-noise gives diffusers' latents and
// writes each video's 17 frames; under mpirun the joint sequence of 16 text
// + 30 video tokens is sharded whole: ulysses sp2 (23 + 23: rank 0 holds
// the text and 7 video tokens), ring sp2 and sp3 (16 + 15 + 15: rank 0 the
// text alone), tp2 (heads, the feed-forward, both modulations gathered),
// cp2 and their combinations, PipeFusion pp2 (the text in the first band)
// alone and with ulysses sp2; each gives the single process's latents (bit
// for bit where docs/parallel.md promises it, within float rounding for ring
// and tp), rank 0 sending exactly the bytes per step `plan` computes for a
// joined text; PAB (spatial = the joint attention, mlp) under ulysses sp2
// equals one process and skips reuses x plan's per-branch bytes, and its
// counts are exact; First-Block Cache makes exactly the decisions this
// fixture's metrics call for, alike under the layouts; dsp is refused (exit 2).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../ops/test_helpers.h"
#include "fixture_runs.h"
#include "layout_checks.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"

using namespace ditgen;

namespace {

const std::string kFixture = "cogvideox_tiny";

struct Outcome {
  Tensor latents;
  nlohmann::json comm;  // rank 0's bytes sent (DITGEN_TEST_COMM_STATS)
};

Outcome run_layout(const testing::TempDir& dir, const std::string& name, int ranks, const std::string& sets) {
  const std::string latents = dir.file(name + ".safetensors"), comm = dir.file(name + "_comm.json");
  const testing::Run r = testing::run_fixture(
      dir, kFixture, "run.json",
      "--init-noise " + testing::reference_dir(kFixture) + "noise.safetensors --save-latents " + latents + " " + sets,
      ranks, "DITGEN_TEST_COMM_STATS=" + comm);
  REQUIRE_MESSAGE(r.code == 0, sets << "\n" << r.output);
  return {testing::saved_latents(latents), nlohmann::json::parse(std::ifstream(comm))};
}

const Tensor& single_process() {
  static testing::TempDir dir("cogvideox_single");
  static const Tensor latents = run_layout(dir, "single", 1, "").latents;
  return latents;
}

double error_to_diffusers(const Tensor& got) {
  const Tensor ref = testing::fixture_tensor(kFixture, "expected.safetensors", "latents");
  REQUIRE(got.shape() == ref.shape());
  return testing::rel_l2(got, ref);
}

// `plan`'s row for the fixture's run (2 videos of 17 frames of 32 x 48, CFG, 16 text tokens, float32).
parallel::PlanRow planned(const parallel::Layout& layout) {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir(kFixture));
  const auto& model = pipe->transformer();
  parallel::Workload work = model.workload(model.latent_shape(32, 48, 17, pipe->vae().factors(), ""));
  work.set_text_tokens(16);  // the joined text's rows, as `plan` sets them
  return parallel::plan_layout(layout, work, 2, true, 4);
}

// plan_bytes false: PipeFusion with sp, where `plan` counts a patched step
// (rank 0's sp share of each of the 2 bands of 23 tokens: 12 + 12) and a
// warm-up step sends the whole sequence's shard (23), as docs/wan.md says.
void check_layout(int ranks, const std::string& sets, const parallel::Layout& layout, bool plan_bytes = true) {
  REQUIRE(layout.world_size() == ranks);
  testing::TempDir dir("cogvideox_layout");
  const Outcome got = run_layout(dir, "parallel", ranks, sets);
  const double err = testing::rel_l2(got.latents, single_process());
  MESSAGE(sets << ": relative L2 vs single process " << err << ", vs diffusers " << error_to_diffusers(got.latents));
  CHECK(err < 1e-5);
  if (testing::promises_identical(layout))
    CHECK_MESSAGE(testing::differing(got.latents, single_process()) == 0, sets << ": not bit-identical");
  CHECK(error_to_diffusers(got.latents) < 1e-4);
  const double forwards = got.comm["forwards"].get<double>();
  REQUIRE(forwards == 4);
  const parallel::PlanRow plan = planned(layout);
  const double sent = testing::sent_per_step(got.comm);
  MESSAGE("  bytes per step sent by rank 0: " << sent << "; plan " << plan.comm_bytes_per_step_per_rank);
  if (plan_bytes) CHECK(sent == plan.comm_bytes_per_step_per_rank);
}

}  // namespace

TEST_CASE("cogvideox CLI: the fixture's run config gives diffusers' latents and 17 frames per video") {
  testing::TempDir tmp("cogvideox_cli");
  const double err = error_to_diffusers(single_process());
  MESSAGE("cogvideox_tiny CLI latents: relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
  const testing::Run r = testing::run_fixture(tmp, kFixture, "run.json", "--steps 2");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  for (const char* name : {"video_0000_f000.png", "video_0000_f016.png", "video_0001_f008.png"}) {
    CAPTURE(name);
    CHECK(std::ifstream(tmp.file(name)).good());
  }
  CHECK_FALSE(std::ifstream(tmp.file("video_0000_f017.png")).good());
}

TEST_CASE("cogvideox CLI: bad requests exit 2 naming the field, dsp refused") {
  testing::TempDir tmp("cogvideox_bad");
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : {Case{"--frames 13", "generate.frames: 13 frames"},
                        Case{"--set generate.max_sequence_length=20", "generate.max_sequence_length: 20"},
                        Case{"--set 'pab.cross={\"range\":2,\"threshold\":[100,800]}'", "pab.cross"}}) {
    CAPTURE(c.args);
    const testing::Run r = testing::run_fixture(tmp, kFixture, "run.json", c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, r.output);
  }
  const testing::Run dsp =
      testing::run_fixture(tmp, kFixture, "run.json", "--set parallel.sp=2 --set parallel.sp_mode=dsp", 2);
  CHECK(dsp.code == 2);
  CHECK_MESSAGE(dsp.output.find("dsp") != std::string::npos, dsp.output);
}

TEST_CASE("cogvideox ulysses sp2 (46 joint tokens as 23 + 23: the text and 7 video tokens on rank 0)") {
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("cogvideox ring sp2") {
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring", {2, 1, 1, parallel::SpMode::kRing});
}
TEST_CASE("cogvideox ring sp3 (16 + 15 + 15: rank 0 holds only text rows)") {
  check_layout(3, "--set parallel.sp=3 --set parallel.sp_mode=ring", {3, 1, 1, parallel::SpMode::kRing});
}
TEST_CASE("cogvideox cp2") { check_layout(2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}); }
TEST_CASE("cogvideox tp2") { check_layout(2, "--set parallel.tp=2", {1, 1, 2, parallel::SpMode::kUlysses}); }
TEST_CASE("cogvideox ulysses sp2 x cp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.sp_mode=ulysses",
               {2, 2, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("cogvideox pp2 PipeFusion, warm-up over every step") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=4", {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 4});
}
TEST_CASE("cogvideox pp2 x sp2 ulysses PipeFusion, warm-up over every step") {
  check_layout(4, "--set parallel.pp=2 --set parallel.sp=2 --set parallel.sp_mode=ulysses --set parallel.warmup_steps=4",
               {2, 1, 1, parallel::SpMode::kUlysses, 2, 0, 4}, /*plan_bytes=*/false);
}
TEST_CASE("cogvideox pp2 x cp2 PipeFusion, warm-up over every step") {
  check_layout(4, "--set parallel.pp=2 --set parallel.cp=2 --set parallel.warmup_steps=4",
               {1, 2, 1, parallel::SpMode::kUlysses, 2, 0, 4});
}

// PAB on CogVideoX: spatial is the joint attention, mlp the feed-forward.
// 6 steps inside (0, 1000): range 2 reuses at counts 1, 3, 5. Parity with
// diffusers' own PAB hook (latents and counts) is test_pab_parity.cpp's;
// here, the counts of one process and of ulysses sp2, exactly.
TEST_CASE("cogvideox PAB: ulysses sp2 equal to one process, skipped bytes = reuses x plan's per-branch bytes") {
  const std::string pab = "--steps 6 --set 'pab={\"spatial\":{\"range\":2,\"threshold\":[0,1000]},"
                          "\"mlp\":{\"range\":2,\"threshold\":[0,1000],\"blocks\":[1]}}' --pab-stats ";
  testing::TempDir dir("cogvideox_pab");
  const Tensor off = run_layout(dir, "off", 1, "--steps 6").latents;
  const Tensor single = run_layout(dir, "single", 1, pab + dir.file("single_pab.json")).latents;
  CHECK(testing::differing(single, off) > 0);  // it reused
  const Outcome got = run_layout(dir, "sp2", 2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses " + pab +
                                                    dir.file("sp2_pab.json"));
  CHECK_MESSAGE(testing::differing(got.latents, single) == 0, "ulysses sp2 with PAB: not bit-identical to one process");
  const parallel::PlanRow plan = planned({2, 1, 1, parallel::SpMode::kUlysses});
  for (const std::string file : {"single_pab.json", "sp2_pab.json"}) {
    CAPTURE(file);
    const auto kinds = nlohmann::json::parse(std::ifstream(dir.file(file)))["kinds"];
    CHECK(kinds["spatial"]["reused"] == 6);  // 3 per block, 2 blocks
    CHECK(kinds["spatial"]["computed"] == 6);
    CHECK(kinds["mlp"]["reused"] == 3);  // block 1 only
    CHECK(kinds["mlp"]["computed"] == 3);
    if (file == "sp2_pab.json") testing::check_pab_skipped_bytes(kinds, plan, {"spatial", "mlp"});
  }
}

// A step cache on CogVideoX: First-Block Cache at 2.0 over the fixture's 4
// steps. This tiny random model's metrics (per output: 1.3-1.6 at step 1,
// 4.6-5.1 at step 2, 0.58 at step 3) sit more than 15% from 2.0, so each
// output computes steps 0 and 2 and skips 1 and 3 (the metric against
// ditgen's rule over diffusers' blocks: test_step_cache_parity.cpp); ulysses
// sp2 and cp2 make the same decisions and give one process's latents.
TEST_CASE("cogvideox first-block cache: skips steps 1 and 3, and ulysses sp2 and cp2 make those decisions with one process's latents") {
  const std::string cache = "--set 'cache={\"kind\":\"first_block\",\"threshold\":2.0}' --cache-stats ";
  testing::TempDir dir("cogvideox_cache");
  const Tensor off = run_layout(dir, "off", 1, "").latents;
  const Tensor single = run_layout(dir, "single", 1, cache + dir.file("single_cache.json")).latents;
  CHECK(testing::differing(single, off) > 0);  // it skipped
  const nlohmann::json want = nlohmann::json::parse(std::ifstream(dir.file("single_cache.json")));
  REQUIRE(want["decisions"].size() == 8);  // 4 steps x 2 outputs, the CFG halves deciding together
  for (const auto& d : want["decisions"]) {
    CAPTURE(d.dump());
    CHECK_FALSE(d.contains("half"));
    const int step = d["step"].get<int>();
    CHECK(d["computed"] == (step % 2 == 0));
    CHECK(d["metric"].is_null() == (step == 0));
    if (step > 0) CHECK(std::fabs(d["metric"].get<double>() / 2.0 - 1.0) > 0.15);  // far from the threshold
  }
  CHECK(want["steps_computed"] == 2);
  CHECK(want["steps_skipped"] == 2);
  for (const auto& [name, sets] : {std::pair{std::string("sp2"), std::string("--set parallel.sp=2 --set parallel.sp_mode=ulysses ")},
                                   std::pair{std::string("cp2"), std::string("--set parallel.cp=2 ")}}) {
    CAPTURE(name);
    const Outcome got = run_layout(dir, name, 2, sets + cache + dir.file(name + "_cache.json"));
    CHECK_MESSAGE(testing::differing(got.latents, single) == 0, name << " with a step cache: not bit-identical");
    const nlohmann::json stats = nlohmann::json::parse(std::ifstream(dir.file(name + "_cache.json")));
    REQUIRE(stats["decisions"].size() == want["decisions"].size());
    for (size_t i = 0; i < want["decisions"].size(); ++i) {
      CHECK(stats["decisions"][i]["step"] == want["decisions"][i]["step"]);
      CHECK(stats["decisions"][i]["output"] == want["decisions"][i]["output"]);
      CHECK(stats["decisions"][i]["computed"] == want["decisions"][i]["computed"]);
    }
  }
}
