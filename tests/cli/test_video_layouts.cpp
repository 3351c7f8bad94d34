// Video sequence parallelism under mpirun (docs/design.md §4, §5), on the tiny
// Latte fixture (4 heads, 3 frames of 5x5 = 25 tokens, 2 videos with CFG):
// dsp, ulysses and ring, alone and with cp and tp, give the single-process
// latents (and diffusers' for the fixture's 3 frames), with uneven frame
// and token shards (3 or 5 frames, 25 tokens, on 2, 3 and 4 ranks); rank 0
// sends exactly the bytes per step `plan` computes; under PAB the same
// blocks are reused as in one process and each kind's skipped bytes are its
// reuse count times the plan's per-branch figure. Too few frames for dsp
// is exit 2 before any weight is read, and a rank killed mid-run ends the
// whole job promptly with no output left behind.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

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
namespace fs = std::filesystem;

namespace {

const std::string kRef = testing::fixture_dir("latte_tiny") + "/reference/";

// `env` ("NAME=value" or ""): set for ditgen on every rank.
std::string launcher(int ranks, const std::string& env) {
  if (ranks == 1) return env.empty() ? "" : env + " ";
  const std::string name = env.substr(0, env.find('='));
  return (env.empty() ? "" : env + " ") + DITGEN_MPIEXEC + " --oversubscribe -np " + std::to_string(ranks) +
         " -x OMP_NUM_THREADS=1 " + (env.empty() ? "" : "-x " + name + " ");
}

// ditgen on the fixture's DDIM run (3 steps, CFG 7.5, two prompts in one
// batch), pinned to the CPU, one thread per rank.
std::string ditgen_command(const testing::TempDir& dir, int ranks, const std::string& args, const std::string& env = "",
                           const std::string& output = "video.png") {
  return launcher(ranks, env) + DITGEN_EXE + " --device cpu --threads 1 --config " + kRef +
         "run_ddim.json --set model.path=" + testing::fixture_dir("latte_tiny") + " --output " +
         dir.file(output) + " --quiet " + args;
}

struct Outcome {
  Tensor latents;
  nlohmann::json comm;  // rank 0's bytes sent (DITGEN_TEST_COMM_STATS)
  nlohmann::json pab;   // --pab-stats, when PAB is on
};

// One run; `frames` 3 starts from diffusers' noise, other counts from the seed.
Outcome run(const testing::TempDir& dir, const std::string& name, int ranks, const std::string& sets, int frames,
            const std::string& pab = "") {
  const std::string latents = dir.file(name + ".safetensors"), comm = dir.file(name + "_comm.json");
  std::string args = "--save-latents " + latents + " --frames " + std::to_string(frames) + " " + sets;
  if (frames == 3) args += " --init-noise " + kRef + "noise.safetensors";
  if (!pab.empty()) args += pab + " --pab-stats " + dir.file(name + "_pab.json");
  const std::string cmd = ditgen_command(dir, ranks, args, "DITGEN_TEST_COMM_STATS=" + comm);
  const testing::Run r = testing::run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
  Outcome o;
  o.latents = io::SafetensorsFile::open(latents)->load("latents").to(DType::kF32).clone();
  o.comm = nlohmann::json::parse(std::ifstream(comm));
  if (!pab.empty()) o.pab = nlohmann::json::parse(std::ifstream(dir.file(name + "_pab.json")));
  return o;
}

// `plan`'s figures for this layout of the fixture's run (2 videos, CFG) at `frames`.
parallel::PlanRow planned(const parallel::Layout& layout, int frames) {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("latte_tiny"));
  const auto& model = pipe->transformer();
  return parallel::plan_layout(layout, model.workload(model.latent_shape(80, 80, frames, {8}, "")), 2, true, 4);
}

// The single-process latents at `frames`, run once per frame count (PAB on or off).
const Tensor& single(int frames, const std::string& pab = "") {
  static std::map<std::string, Tensor> cache;
  static testing::TempDir dir("latte_sp_single");
  const std::string key = std::to_string(frames) + pab;
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, run(dir, "single_" + std::to_string(cache.size()), 1, "", frames, pab).latents).first;
  return it->second;
}

void check_layout(int ranks, const std::string& sets, const parallel::Layout& layout, int frames = 3) {
  REQUIRE(layout.world_size() == ranks);
  testing::TempDir dir("latte_sp");
  const Outcome got = run(dir, "parallel", ranks, sets, frames);
  const double err = testing::rel_l2(got.latents, single(frames));
  MESSAGE(sets << ", " << frames << " frames: relative L2 vs single process " << err);
  CHECK(err < 1e-5);
  if (promises_identical(layout))
    CHECK_MESSAGE(differing(got.latents, single(frames)) == 0, sets << ": not bit-identical");
  if (frames == 3) {
    const double ref = testing::rel_l2(got.latents, testing::fixture_tensor("latte_tiny", "expected.safetensors",
                                                                          "latents_ddim"));
    MESSAGE("  vs diffusers " << ref);
    CHECK(ref < 1e-4);
  }
  // Rank 0's bytes per step (one forward per DDIM step) against plan, exactly.
  const double forwards = got.comm["forwards"].get<double>();
  REQUIRE(forwards == 3);
  const parallel::PlanRow plan = planned(layout, frames);
  const double sp = got.comm["sp"].get<double>() / forwards, tp = got.comm["tp"].get<double>() / forwards,
               cp = got.comm["cp"].get<double>() / forwards, pp = got.comm["pp"].get<double>() / forwards;
  MESSAGE("  bytes per step sent by rank 0: sp " << sp << ", tp " << tp << ", cp " << cp << ", pp " << pp
                                                 << "; plan: sp attention " << plan.comm_sp << ", tp " << plan.comm_tp
                                                 << ", cp " << plan.comm_cp << ", gathers " << plan.comm_gather
                                                 << ", pp " << plan.comm_pp);
  CHECK(sp + tp + cp + pp == plan.comm_bytes_per_step_per_rank);
  CHECK(cp == plan.comm_cp);
  CHECK(pp == plan.comm_pp);
}

}  // namespace

TEST_CASE("latte dsp sp2 (frames 2 and 1, tokens 13 and 12)") { check_layout(2, "--set parallel.sp=2", {2, 1, 1, parallel::SpMode::kDsp}); }
TEST_CASE("latte dsp sp3 (a frame per rank, tokens 9, 8, 8)") { check_layout(3, "--set parallel.sp=3", {3, 1, 1, parallel::SpMode::kDsp}); }
TEST_CASE("latte ulysses sp2") {
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("latte ulysses sp4 (tokens 7, 6, 6, 6)") {
  check_layout(4, "--set parallel.sp=4 --set parallel.sp_mode=ulysses", {4, 1, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("latte ring sp2") { check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring", {2, 1, 1, parallel::SpMode::kRing}); }
TEST_CASE("latte ring sp3") { check_layout(3, "--set parallel.sp=3 --set parallel.sp_mode=ring", {3, 1, 1, parallel::SpMode::kRing}); }
TEST_CASE("latte dsp sp2 x cp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.cp=2", {2, 2, 1, parallel::SpMode::kDsp});
}
TEST_CASE("latte ulysses sp2 x cp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.sp_mode=ulysses", {2, 2, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("latte ring sp2 x tp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.tp=2 --set parallel.sp_mode=ring", {2, 1, 2, parallel::SpMode::kRing});
}
TEST_CASE("latte dsp sp3 x tp2 (6 ranks)") { check_layout(6, "--set parallel.sp=3 --set parallel.tp=2", {3, 1, 2, parallel::SpMode::kDsp}); }
TEST_CASE("latte dsp sp2 x tp2") { check_layout(4, "--set parallel.sp=2 --set parallel.tp=2", {2, 1, 2, parallel::SpMode::kDsp}); }
TEST_CASE("latte ulysses sp2 x tp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.tp=2 --set parallel.sp_mode=ulysses", {2, 1, 2, parallel::SpMode::kUlysses});
}
TEST_CASE("latte dsp sp2 x cp2 x tp2") {
  check_layout(8, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2", {2, 2, 2, parallel::SpMode::kDsp});
}
TEST_CASE("latte ring sp2 x cp2 x tp2") {
  check_layout(8, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp_mode=ring",
               {2, 2, 2, parallel::SpMode::kRing});
}
// PipeFusion on a video: a patch is a band of tokens of every frame; with a
// warm-up over all 3 steps the result is the single process's.
TEST_CASE("latte pp2 PipeFusion, warm-up over every step") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=3", {1, 1, 1, parallel::SpMode::kDsp, 2, 0, 3});
}
TEST_CASE("latte pp2 x sp2 ulysses x cp2 PipeFusion, 3 patches, warm-up over every step") {
  check_layout(8,
               "--set parallel.pp=2 --set parallel.sp=2 --set parallel.sp_mode=ulysses --set parallel.cp=2 "
               "--set parallel.patches=3 --set parallel.warmup_steps=3",
               {2, 2, 1, parallel::SpMode::kUlysses, 2, 3, 3});
}

// parallel.sp_weights (a mixed machine): dsp shares frames and tokens 3:1.
TEST_CASE("latte dsp sp2 with sp_weights 3:1 (5 frames: 4 and 1, tokens 19 and 6)") {
  parallel::Layout l{2, 1, 1, parallel::SpMode::kDsp};
  l.sp_weights = {3, 1};
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_weights=[3,1]", l, 5);
}
TEST_CASE("latte ring sp2 with sp_weights 1:2 (tokens 8 and 17)") {
  parallel::Layout l{2, 1, 1, parallel::SpMode::kRing};
  l.sp_weights = {1, 2};
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring --set parallel.sp_weights=[1,2]", l);
}
TEST_CASE("latte 5 frames: dsp sp2 (3 and 2 frames), dsp sp3 (2, 2, 1), dsp sp4 (2, 1, 1, 1), ring sp3") {
  check_layout(2, "--set parallel.sp=2", {2, 1, 1, parallel::SpMode::kDsp}, 5);
  check_layout(3, "--set parallel.sp=3", {3, 1, 1, parallel::SpMode::kDsp}, 5);
  check_layout(4, "--set parallel.sp=4", {4, 1, 1, parallel::SpMode::kDsp}, 5);
  check_layout(3, "--set parallel.sp=3 --set parallel.sp_mode=ring", {3, 1, 1, parallel::SpMode::kRing}, 5);
}

TEST_CASE("latte PAB under dsp, ulysses and ring: single-process PAB, skipped bytes = reuses x plan's per-branch bytes") {
  // 5 frames, 6 steps: DDIM timesteps 830, 664, 498, 332, 166, 0; each
  // kind reuses inside (100, 900) by its range.
  const std::string pab =
      " --steps 6 --set 'pab={\"spatial\":{\"range\":2,\"threshold\":[100,900]},"
      "\"temporal\":{\"range\":2,\"threshold\":[100,900]},\"cross\":{\"range\":3,\"threshold\":[100,900]},"
      "\"mlp\":{\"range\":2,\"threshold\":[100,900],\"blocks\":[1]}}'";
  const int frames = 5;
  const Tensor& reference = single(frames, pab);
  testing::TempDir dir("latte_sp_pab");
  for (auto [ranks, sets, layout] :
       {std::tuple<int, std::string, parallel::Layout>{2, "--set parallel.sp=2", {2, 1, 1, parallel::SpMode::kDsp}},
        {2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses}},
        {4, "--set parallel.sp=2 --set parallel.tp=2 --set parallel.sp_mode=ring", {2, 1, 2, parallel::SpMode::kRing}},
        {8, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2", {2, 2, 2, parallel::SpMode::kDsp}}}) {
    CAPTURE(sets);
    std::string name = "p";  // built by += : GCC 12 warns falsely (-Wrestrict) on "p" + string
    name += std::to_string(ranks) + parallel::name_of(layout.sp_mode);
    const Outcome got = run(dir, name, ranks, sets, frames, pab);
    const double err = testing::rel_l2(got.latents, reference);
    MESSAGE(sets << " with PAB: relative L2 vs single process " << err);
    CHECK(err < 1e-5);
    const parallel::PlanRow plan = planned(layout, frames);
    const auto& kinds = got.pab["kinds"];
    // 2 layers; in the window (5 steps, counts 0 to 4) range 2 reuses at counts 1 and 3.
    CHECK(kinds["spatial"]["reused"] == 4);
    CHECK(kinds["temporal"]["reused"] == 4);
    testing::check_pab_skipped_bytes(kinds, plan, {"spatial", "temporal", "cross", "mlp"});
    // dsp: the temporal switch is the only sp traffic in a block; ulysses
    // and ring: the spatial attention's.
    if (layout.sp_mode == parallel::SpMode::kDsp) {
      CHECK(plan.branch_temporal > plan.branch_mlp);
      CHECK(plan.branch_spatial == plan.branch_mlp);
    } else {
      CHECK(plan.branch_spatial > plan.branch_mlp);
      CHECK(plan.branch_temporal == plan.branch_mlp);
    }
  }
}

TEST_CASE("latte dsp with fewer frames than ranks: exit 2 before loading, with the layouts that work") {
  testing::TempDir dir("latte_sp_frames");
  // A copy of the model without the transformer's weights: the layout check
  // must fail first, on config.json alone.
  const fs::path model = dir.file("model");
  fs::copy(testing::fixture_dir("latte_tiny"), model, fs::copy_options::recursive);
  fs::remove(model / "transformer" / "diffusion_pytorch_model.safetensors");
  const testing::Run r = testing::run_command(ditgen_command(dir, 4, "--set parallel.sp=4 --set model.path=" + model.string()));
  CHECK(r.code == 2);
  CHECK(r.output.find("parallel.sp = 4 exceeds the 3 frames per video") != std::string::npos);
  CHECK(r.output.find("Valid layouts for 4 ranks") != std::string::npos);
  CHECK(r.output.find("sp4 ulysses") != std::string::npos);
  CHECK(r.output.find("sp2 x cp2 dsp") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("video_0000_f000.png")));
}

TEST_CASE("a rank killed mid-video ends the whole job, no output left") {
  testing::TempDir dir("latte_sp_kill");
  // Rank 1 of sp2 x tp2 kills itself as step 3 of 8 begins; the other
  // ranks are then inside that step's all-to-alls and all-reduces.
  const std::string cmd = "timeout 60 sh -c \"" +
                          ditgen_command(dir, 4, "--set parallel.sp=2 --set parallel.tp=2 --steps 8",
                                         "DITGEN_TEST_KILL_AT_STEP=1:3", "video.mp4") +
                          "\"";
  const testing::Run r = testing::run_command(cmd);
  MESSAGE("exit " << r.code << " after " << r.seconds << " s");
  CHECK(r.code != 0);
  CHECK(r.code != 124);  // not the hang guard's timeout (the job takes seconds)
  CHECK(r.output.find("killing itself at step 3") != std::string::npos);
  for (const auto& entry : fs::directory_iterator(dir.path))  // no video, no temporary file
    CHECK_MESSAGE(false, "left behind: " << entry.path().filename().string());
}
