// Parallel layouts under mpirun (docs/design.md §4): every layout reproduces the
// single-process latents of the 5x5-token, 12-head fixture (uneven token
// shards for sp 2, 3, 4) and sends exactly the bytes per step that `plan`
// computes for it (rank 0's count), an impossible layout fails fast with
// exit code 2 and lists the layouts that would work, and a rank that fails
// ends the whole job promptly.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "layout_checks.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
using testing::differing;
using testing::promises_identical;
using testing::sent_per_step;

namespace {

using testing::Run;
using testing::run_command;

// ditgen pinned to the CPU: these tests check CPU layouts (on a machine with
// a GPU --device auto would pick CUDA; tests/gpu/ covers the CUDA layouts).
const std::string kDitgen = std::string(DITGEN_EXE) + " --device cpu";

std::string mpirun(int ranks) {
  return std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) + " -x OMP_NUM_THREADS=1 ";
}

// The fixture's DDIM run (6 steps, CFG 4) from diffusers' noise; returns the saved latents.
Tensor run_fixture(const testing::TempDir& dir, const std::string& name, int ranks, const std::string& sets,
                   const std::string& comm_stats = "") {
  const std::string latents = dir.file(name + ".safetensors");
  const std::string env = comm_stats.empty() ? "" : "DITGEN_TEST_COMM_STATS=" + comm_stats + " ";
  const std::string cmd = env + (ranks > 1 ? mpirun(ranks) + (env.empty() ? "" : "-x DITGEN_TEST_COMM_STATS ")
                                           : std::string()) +
                          kDitgen + " --config " +
                          testing::fixture_dir("dit_odd") + "/reference/run_ddim.json --set model.path=" +
                          testing::fixture_dir("dit_odd") + " --init-noise " + testing::fixture_dir("dit_odd") +
                          "/reference/noise.safetensors --save-latents " + latents + " --output " +
                          dir.file(name + "/img.png") + " --quiet --threads 1 " + sets;
  const Run r = run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
  return io::SafetensorsFile::open(latents)->load("latents").to(DType::kF32).clone();
}

// `plan`'s bytes per denoising step for this layout of the fixture's run
// (2 outputs in one batch of 2, CFG), from config.json alone.
parallel::PlanRow planned(const parallel::Layout& layout) {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("dit_odd"));
  const auto& model = pipe->transformer();
  return parallel::plan_layout(layout,
                               model.workload(model.latent_shape(0, 0, 0, pipe->vae().factors(), "")),
                               2, true, 4);
}

void check_layout(int ranks, const std::string& sets, const parallel::Layout& layout) {
  REQUIRE(layout.world_size() == ranks);
  testing::TempDir dir("ditgen_layout");
  const Tensor single = run_fixture(dir, "single", 1, "");
  const Tensor parallel = run_fixture(dir, "parallel", ranks, sets, dir.file("comm.json"));
  const Tensor ref = testing::fixture_tensor("dit_odd", "expected.safetensors", "ddim_latents");
  const double err = testing::rel_l2(parallel, single);
  MESSAGE(sets << ": relative L2 vs single process " << err << ", vs diffusers " << testing::rel_l2(parallel, ref));
  CHECK(err < 1e-5);
  if (promises_identical(layout)) CHECK_MESSAGE(differing(parallel, single) == 0, sets << ": not bit-identical");
  CHECK(testing::rel_l2(parallel, ref) < 1e-4);

  // What rank 0 sent, per step (one forward per DDIM step), against plan.
  const auto sent = nlohmann::json::parse(std::ifstream(dir.file("comm.json")));
  const double forwards = sent["forwards"].get<double>();
  REQUIRE(forwards == 6);
  const parallel::PlanRow plan = planned(layout);
  MESSAGE(sets << ": bytes per step sent by rank 0: tp " << sent["tp"].get<int64_t>() / forwards << ", sp "
               << sent["sp"].get<int64_t>() / forwards << ", cp " << sent["cp"].get<int64_t>() / forwards << ", pp "
               << sent["pp"].get<int64_t>() / forwards << "; plan: sp " << plan.comm_sp << ", tp " << plan.comm_tp
               << ", cp " << plan.comm_cp << ", gathers " << plan.comm_gather << ", pp " << plan.comm_pp);
  CHECK(sent_per_step(sent) == plan.comm_bytes_per_step_per_rank);
  CHECK(sent["cp"].get<double>() / forwards == plan.comm_cp);
  CHECK(sent["pp"].get<double>() / forwards == plan.comm_pp);
}

}  // namespace

TEST_CASE("layout cp2") { check_layout(2, "--set parallel.cp=2", {1, 2, 1}); }
TEST_CASE("layout sp2 ulysses") { check_layout(2, "--set parallel.sp=2", {2, 1, 1}); }
TEST_CASE("layout sp2 ring") { check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring", {2, 1, 1, parallel::SpMode::kRing}); }
TEST_CASE("layout sp3 ulysses (25 tokens: shards 9, 8, 8)") { check_layout(3, "--set parallel.sp=3", {3, 1, 1}); }
TEST_CASE("layout sp4 ulysses (uneven shards)") { check_layout(4, "--set parallel.sp=4", {4, 1, 1}); }
TEST_CASE("layout sp4 ring (uneven shards)") {
  check_layout(4, "--set parallel.sp=4 --set parallel.sp_mode=ring", {4, 1, 1, parallel::SpMode::kRing});
}
TEST_CASE("layout tp2") { check_layout(2, "--set parallel.tp=2", {1, 1, 2}); }
TEST_CASE("layout tp3") { check_layout(3, "--set parallel.tp=3", {1, 1, 3}); }
TEST_CASE("layout sp2 x cp2") { check_layout(4, "--set parallel.sp=2 --set parallel.cp=2", {2, 2, 1}); }
TEST_CASE("layout tp2 x sp2") { check_layout(4, "--set parallel.tp=2 --set parallel.sp=2", {2, 1, 2}); }
TEST_CASE("layout sp2 x cp2 x tp2") {
  check_layout(8, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp_mode=ring",
               {2, 2, 2, parallel::SpMode::kRing});
}

// parallel.sp_weights (a mixed machine): ring shares the 25 tokens 2:1, 17 and 8.
TEST_CASE("layout sp2 ring with sp_weights 2:1") {
  parallel::Layout l{2, 1, 1, parallel::SpMode::kRing};
  l.sp_weights = {2, 1};
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring --set parallel.sp_weights=[2,1]", l);
}
TEST_CASE("layout sp3 ring x cp2 with sp_weights 1:2:1") {
  parallel::Layout l{3, 2, 1, parallel::SpMode::kRing};
  l.sp_weights = {1, 2, 1};
  check_layout(6,
               "--set parallel.sp=3 --set parallel.cp=2 --set parallel.sp_mode=ring "
               "--set parallel.sp_weights=[1,2,1]",
               l);
}

TEST_CASE("layout sp2 naive_patch: each band attends within itself, sends only the final gather") {
  testing::TempDir dir("ditgen_layout");
  const Tensor single = run_fixture(dir, "single", 1, "");
  const Tensor patched = run_fixture(dir, "patched", 2, "--set parallel.sp=2 --set parallel.sp_mode=naive_patch",
                                     dir.file("comm.json"));
  // An approximation: not the single-process result. Measured on this
  // 5x5-token fixture (each band loses half the keys): relative L2 0.21;
  // the bound is a sanity floor, not a quality claim.
  const double err = testing::rel_l2(patched, single);
  MESSAGE("naive_patch sp2: relative L2 vs single process " << err);
  CHECK(err > 1e-3);
  CHECK(err < 0.5);
  // No attention traffic: rank 0 sends only its share of the final gather, as plan says.
  const auto sent = nlohmann::json::parse(std::ifstream(dir.file("comm.json")));
  const double forwards = sent["forwards"].get<double>();
  const parallel::PlanRow plan = planned({2, 1, 1, parallel::SpMode::kNaivePatch});
  CHECK(plan.comm_sp == 0);
  CHECK(forwards == 6);
  CHECK(sent_per_step(sent) == plan.comm_bytes_per_step_per_rank);
}

// PipeFusion (parallel/patch_pipeline.h): with a warm-up as long as the run
// every step is synchronous, so the result is the single process's.
TEST_CASE("layout pp2 PipeFusion, warm-up over every step") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=6", {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 6});
}
// model.dtype bfloat16: the CPU computes in float32 (Placement::storage()), so
// the last stage shares a float32 prediction; the run once stopped in
// unpatchify because the shared tensor was made bfloat16.
TEST_CASE("layout pp2 PipeFusion in bfloat16 equals the single process in bfloat16") {
  testing::TempDir dir("ditgen_layout");
  const std::string bf16 = "--set model.dtype=bfloat16 ";
  const Tensor single = run_fixture(dir, "single", 1, bf16);
  const Tensor piped = run_fixture(dir, "piped", 2, bf16 + "--set parallel.pp=2 --set parallel.warmup_steps=6");
  CHECK(differing(piped, single) == 0);
}
TEST_CASE("layout pp2 x cp2 x tp2 PipeFusion, 3 patches, warm-up over every step") {
  check_layout(8,
               "--set parallel.pp=2 --set parallel.cp=2 --set parallel.tp=2 --set parallel.patches=3 "
               "--set parallel.warmup_steps=6",
               {1, 2, 2, parallel::SpMode::kUlysses, 2, 3, 6});
}

TEST_CASE("layout pp2 PipeFusion after one warm-up step: stale keys and values, bytes as planned") {
  testing::TempDir dir("ditgen_layout");
  const Tensor single = run_fixture(dir, "single", 1, "");
  const Tensor piped = run_fixture(dir, "piped", 2, "--set parallel.pp=2 --set parallel.patches=3",
                                   dir.file("comm.json"));
  // Steps 2..6 attend to the later patches' keys and values of the step
  // before: not the single-process result. Measured on this 5x5-token
  // fixture: relative L2 0.009 (2 patches); the bounds are a sanity floor
  // (the stale path ran, and it is not noise), not a quality claim: the
  // benchmark (scripts/bench/bench_patch_parallel.sh) reports PSNR on the
  // trained default model.
  const double err = testing::rel_l2(piped, single);
  MESSAGE("PipeFusion pp2, 3 patches, 1 warm-up step: relative L2 vs single process " << err);
  CHECK(err > 1e-5);
  CHECK(err < 0.1);
  const auto sent = nlohmann::json::parse(std::ifstream(dir.file("comm.json")));
  const parallel::PlanRow plan = planned({1, 1, 1, parallel::SpMode::kUlysses, 2, 3, 1});
  CHECK(sent["forwards"].get<double>() == 6);
  CHECK(sent_per_step(sent) == plan.comm_bytes_per_step_per_rank);
  CHECK(plan.comm_pp > 0);
}

TEST_CASE("an impossible layout fails fast with exit 2 and lists the layouts that work") {
  const std::string base = kDitgen + " --config " + testing::fixture_dir("dit_odd") +
                           "/reference/run_ddim.json --set model.path=" + testing::fixture_dir("dit_odd") + " ";
  Run r = run_command(mpirun(3) + base + "--set parallel.sp=2");  // world 3 != 2
  CHECK(r.code == 2);
  CHECK(r.output.find("world size 3") != std::string::npos);
  CHECK(r.output.find("sp3") != std::string::npos);  // a layout that would work
  testing::TempDir dir("ditgen_layout_sanity");
  r = run_command(mpirun(4) + base + "--set parallel.sp=4 --set parallel.tp=1 --set parallel.cp=1 "
                                     "--set generate.guidance_scale=1 --quiet --output " + dir.file("img.png"));
  CHECK(r.code == 0);  // sanity: ulysses sp4 on 12 heads is fine without CFG
  r = run_command(mpirun(2) + base + "--set parallel.cp=2 --set generate.guidance_scale=1");
  CHECK(r.code == 2);
  CHECK(r.output.find("guidance_scale") != std::string::npos);
  r = run_command(base + "--set parallel.tp=5");  // 12 heads, one process
  CHECK(r.code == 2);
  CHECK(r.output.find("divisible") != std::string::npos);
}

// `timeout 60` is a hang guard only (the job takes seconds): a rank left
// waiting in a collective would hang until it, and exit 124.
TEST_CASE("a failing rank ends the whole job with its exit code, no rank left hanging") {
  testing::TempDir dir("ditgen_layout_fail");
  setenv("DITGEN_TEST_FAIL_RANK", "1", 1);
  const std::string cmd = mpirun(3) + "-x DITGEN_TEST_FAIL_RANK " + kDitgen + " --config " +
                          testing::fixture_dir("dit_odd") + "/reference/run_ddim.json --set model.path=" +
                          testing::fixture_dir("dit_odd") + " --set parallel.sp=3 --steps 1000 --output " +
                          dir.file("img.png") + " --quiet";
  const Run r = run_command("timeout 60 " + cmd);
  unsetenv("DITGEN_TEST_FAIL_RANK");
  MESSAGE("exit " << r.code << " after " << r.seconds << " s");
  CHECK(r.code == 4);  // not 124, the guard's
  CHECK(r.output.find("injected failure on rank 1") != std::string::npos);

  // Issue 36: the failing rank's one line is the last the user reads. The
  // other ranks, torn down by a signal, say nothing; OpenMPI's own banner
  // about MPI_ABORT races that line unless mpirun -q keeps it out.
  setenv("DITGEN_TEST_FAIL_RANK", "1", 1);
  const std::string quiet_mpirun = std::string(DITGEN_MPIEXEC) + " -q" + mpirun(3).substr(std::string(DITGEN_MPIEXEC).size());
  const std::string loud = quiet_mpirun + "-x DITGEN_TEST_FAIL_RANK " + kDitgen + " --config " +
                           testing::fixture_dir("dit_odd") + "/reference/run_ddim.json --set model.path=" +
                           testing::fixture_dir("dit_odd") + " --set parallel.sp=3 --steps 1000 --output " +
                           dir.file("img.png");
  const Run q = run_command("timeout 60 " + loud);
  unsetenv("DITGEN_TEST_FAIL_RANK");
  CHECK(q.code == 4);
  std::string last = q.output;
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  CHECK_MESSAGE(last == "ditgen[rank 1]: error: injected failure on rank 1 (DITGEN_TEST_FAIL_RANK)", q.output);
  CHECK(q.output.find("interrupted") == std::string::npos);
}

// PipeFusion: the last stage killed mid-run while the first waits to send
// it a patch (a point-to-point send, not a collective): the job still ends.
TEST_CASE("a pipeline stage killed mid-run ends the whole job, no output left") {
  testing::TempDir dir("ditgen_layout_kill");
  const std::string cmd = "DITGEN_TEST_KILL_AT_STEP=1:3 " + mpirun(2) + "-x DITGEN_TEST_KILL_AT_STEP " + kDitgen +
                          " --config " + testing::fixture_dir("dit_odd") +
                          "/reference/run_ddim.json --set model.path=" + testing::fixture_dir("dit_odd") +
                          " --set parallel.pp=2 --steps 1000 --output " +
                          dir.file("img.png") + " --quiet";
  const Run r = run_command("timeout 60 sh -c \"" + cmd + "\"");
  MESSAGE("exit " << r.code << " after " << r.seconds << " s");
  CHECK(r.code != 0);
  CHECK(r.code != 124);  // not the hang guard's timeout
  CHECK(r.output.find("killing itself at step 3") != std::string::npos);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path))
    CHECK_MESSAGE(false, "left behind: " << entry.path().filename().string());
}

TEST_CASE("PAB under parallel layouts reproduces single-process PAB and skips their communication") {
  const std::string pab =
      " --steps 20 --set 'pab={\"spatial\":{\"range\":2,\"threshold\":[100,800]},"
      "\"mlp\":{\"range\":3,\"threshold\":[100,800],\"blocks\":[0,1]}}'";
  testing::TempDir dir("ditgen_layout_pab");
  const Tensor single = run_fixture(dir, "single", 1, pab);
  for (auto [ranks, sets] : {std::pair<int, std::string>{2, "--set parallel.cp=2"},
                             {2, "--set parallel.sp=2 --set parallel.sp_mode=ring"},
                             {3, "--set parallel.tp=3"},
                             {8, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2"}}) {
    std::string name = "p";  // built by += : GCC 12 warns falsely (-Wrestrict) on "p" + string
    name += std::to_string(ranks) + "_" + std::to_string(sets.size());
    const Tensor parallel = run_fixture(dir, name, ranks, sets + pab + " --pab-stats " + dir.file(name + ".json"));
    const double err = testing::rel_l2(parallel, single);
    MESSAGE(sets << " with PAB: relative L2 vs single process " << err);
    CHECK(err < 1e-5);
    const auto stats = nlohmann::json::parse(std::ifstream(dir.file(name + ".json")));
    CHECK(stats["kinds"]["spatial"]["reused"] == 12);  // the same decisions on every layout
    CHECK(stats["kinds"]["mlp"]["reused"] == 18);
    const bool communicates = sets != "--set parallel.cp=2";  // cp exchanges eps once per step, outside blocks
    CHECK((stats["kinds"]["spatial"]["comm_bytes_skipped"].get<int64_t>() > 0) == communicates);
  }
}

// The default image model (samples/dit-shapes: 6 layers, 8x8 tokens, 4
// heads) in float32, 3 images, 3 DDIM steps: deep enough for uneven
// stages, tokens that every patch and sp shard divide evenly.
struct ShapesRun {
  testing::TempDir dir{"ditgen_layout_shapes"};
  const std::string common = " --config " + std::string(DITGEN_SOURCE_DIR) + "/configs/shapes-image.json" +
                             " --set model.path=" + DITGEN_SOURCE_DIR +
                             "/samples/dit-shapes --set model.dtype=float32 --set generate.steps=3 "
                             "--set generate.class_labels=[0,7,13] --set generate.batch_size=3 ";
  // Latents of one run (ranks > 1: mpirun; rank 0's bytes into NAME.comm.json).
  Tensor run(const std::string& name, int ranks, const std::string& sets) const {
    const std::string latents = dir.file(name + ".safetensors");
    const std::string stats = dir.file(name + ".comm.json");
    const std::string cmd = "DITGEN_TEST_COMM_STATS=" + stats + " " +
                            (ranks > 1 ? mpirun(ranks) + "-x DITGEN_TEST_COMM_STATS " : std::string()) + kDitgen +
                            common + "--quiet --threads 1 --save-latents " + latents + " --output " +
                            dir.file(name + "/s.png") + " " + sets;
    const Run r = run_command(cmd);
    REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
    return io::SafetensorsFile::open(latents)->load("latents").to(DType::kF32).clone();
  }
  nlohmann::json sent(const std::string& name) const {
    return nlohmann::json::parse(std::ifstream(dir.file(name + ".comm.json")));
  }
  // plan's figures for this run (3 images, CFG, float32).
  static parallel::PlanRow planned(const parallel::Layout& layout) {
    const auto pipe = pipeline::Pipeline::open(std::string(DITGEN_SOURCE_DIR) + "/samples/dit-shapes");
    const auto& model = pipe->transformer();
    return parallel::plan_layout(
        layout, model.workload(model.latent_shape(0, 0, 0, pipe->vae().factors(), "")), 3, true, 4);
  }
};

// PipeFusion stages sized by parallel.sp_weights: weights 2:1 give stage 0
// layers 0-3 and stage 1 layers 4-5 (plan's per-rank weights say so); with
// a warm-up over every step the images are the single process's.
TEST_CASE("layout pp2 with sp_weights 2:1 on the default image model (4 and 2 layers)") {
  const ShapesRun shapes;
  const Tensor single = shapes.run("single", 1, "");
  const std::string layout = "--set parallel.pp=2 --set parallel.sp_weights=[2,1] --set parallel.warmup_steps=3";
  const Tensor piped = shapes.run("piped", 2, layout);
  const double err = testing::rel_l2(piped, single);
  MESSAGE("pp2 weights 2:1, warm-up over every step: relative L2 vs single process " << err);
  CHECK(err < 1e-5);
  parallel::Layout l{1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 3};
  l.sp_weights = {2, 1};
  CHECK(sent_per_step(shapes.sent("piped")) == ShapesRun::planned(l).comm_bytes_per_step_per_rank);
  const Run plan = run_command(kDitgen + " plan" + shapes.common + layout);
  REQUIRE_MESSAGE(plan.code == 0, plan.output);
  CHECK(plan.output.find("pp2 (2 patches) 2:1") != std::string::npos);
}

// PipeFusion x Ulysses: each stage is an sp group sharing every patch.
TEST_CASE("layout pp2 x sp2 ulysses PipeFusion on the default image model: exact with a full warm-up, stale after") {
  const ShapesRun shapes;
  const Tensor single = shapes.run("single", 1, "");
  const std::string layout = "--set parallel.pp=2 --set parallel.sp=2 --set parallel.patches=4 ";
  const Tensor sync = shapes.run("sync", 4, layout + "--set parallel.warmup_steps=3");
  const Tensor stale = shapes.run("stale", 4, layout + "--set parallel.warmup_steps=1");
  const Tensor stale_pp = shapes.run("stale_pp", 2, "--set parallel.pp=2 --set parallel.patches=4");
  const double sync_err = testing::rel_l2(sync, single), stale_err = testing::rel_l2(stale, single);
  MESSAGE("pp2 x sp2, 4 patches: relative L2 vs single process " << sync_err << " (warm-up 3 of 3 steps), "
                                                                  << stale_err << " (warm-up 1; pp2 alone "
                                                                  << testing::rel_l2(stale_pp, single) << ")");
  CHECK(sync_err < 1e-5);
  // After the warm-up: stale keys and values (3 DDIM steps are long jumps,
  // so far from the single process: 0.49), and Ulysses inside the stages
  // gives exactly pp2's result.
  CHECK(stale_err > 1e-3);
  CHECK(stale_err < 1);
  CHECK(testing::rel_l2(stale, stale_pp) < 1e-5);
  for (const char* name : {"sync", "stale"}) {
    CAPTURE(name);
    const parallel::PlanRow plan = ShapesRun::planned({2, 1, 1, parallel::SpMode::kUlysses, 2, 4, std::string(name) == "sync" ? 3 : 1});
    const auto sent = shapes.sent(name);
    CHECK(sent_per_step(sent) == plan.comm_bytes_per_step_per_rank);
    CHECK(sent["sp"].get<double>() / sent["forwards"].get<double>() == plan.comm_sp);
  }
}
