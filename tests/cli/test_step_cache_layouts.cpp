// Step caches under mpirun (docs/step-caches.md): for every family's
// fixture (DiT, PixArt, Latte, Wan) and both kinds (first_block, teacache),
// every layout makes the single process's decisions (per step, output and,
// for Wan, CFG half) and gives its latents (bit for bit where
// docs/parallel.md promises it, within float rounding for ring and tp).
// Rank 0 sends what the same layout sends never skipping, less the bytes
// the cache says it skipped; on Wan that is `plan`'s bytes per step for each
// forward, less those, plus the cache's own few bytes. Bad input: teacache
// without coefficients on a model that has no published ones is exit 2
// naming cache.coefficients, before any work. Thresholds are picked from a probe
// run (nothing skipped) halfway between two metrics, so the runs skip some
// steps and compute others and no layout's rounding sits on the threshold.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "layout_checks.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

struct Family {
  const char* fixture;  // tests/fixtures/<fixture>
  const char* config;   // its reference run config
};

struct Run {
  Tensor latents;
  nlohmann::json stats;  // --cache-stats
  nlohmann::json comm;   // rank 0's bytes sent (DITGEN_TEST_COMM_STATS)
};

// ditgen on the family's run config over 8 steps with `cache` (a JSON
// object), under mpirun -np ranks when ranks > 1.
Run run(const testing::TempDir& dir, const Family& f, const std::string& name, const nlohmann::json& cache,
        int ranks = 1, const std::string& sets = "") {
  const std::string fdir = testing::fixture_dir(f.fixture);
  const std::string latents = dir.file(name + ".safetensors"), stats = dir.file(name + "_cache.json"),
                    comm = dir.file(name + "_comm.json");
  const std::string env = "DITGEN_TEST_COMM_STATS=" + comm;
  std::string launcher = env + " ";
  if (ranks > 1)
    launcher += std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                " -x OMP_NUM_THREADS=1 -x DITGEN_TEST_COMM_STATS ";
  const std::string cmd = launcher + DITGEN_EXE + " --device cpu --threads " + (ranks > 1 ? "1" : "2") +
                          " --config " + fdir + "/reference/" + f.config + " --set model.path=" + fdir +
                          " --init-noise " + fdir + "/reference/noise.safetensors --steps 8 --output " +
                          dir.file(name + ".png") + " --quiet --save-latents " + latents + " --cache-stats " + stats +
                          " --set 'cache=" + cache.dump() + "' " + sets;
  const testing::Run r = testing::run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, cmd << "\n" << r.output);
  return {io::SafetensorsFile::open(latents)->load("latents").to(DType::kF32).clone(),
          std::filesystem::exists(stats) ? nlohmann::json::parse(std::ifstream(stats)) : nlohmann::json(),
          nlohmann::json::parse(std::ifstream(comm))};
}

// A threshold halfway across the widest gap between the probe's sorted
// metrics (teacache: values of the identity polynomial) near their median.
double threshold_between(const nlohmann::json& stats) {
  std::vector<double> m;
  for (const auto& d : stats["decisions"])
    if (!d["metric"].is_null()) m.push_back(d["metric"].get<double>());
  REQUIRE(m.size() >= 4);
  std::sort(m.begin(), m.end());
  m.erase(std::unique(m.begin(), m.end()), m.end());
  size_t best = m.size() / 2;
  for (size_t i = m.size() / 4; i + 1 < m.size() && i < 3 * m.size() / 4 + 1; ++i)
    if (m[i + 1] - m[i] > m[best + 1 < m.size() ? best + 1 : best] - m[best]) best = i;
  REQUIRE(best + 1 < m.size());
  return 0.5 * (m[best] + m[best + 1]);
}

nlohmann::json cache_of(const char* kind, double threshold) {
  nlohmann::json c = {{"kind", kind}, {"threshold", threshold}};
  if (std::string(kind) == "teacache") c["coefficients"] = {0, 0, 0, 1, 0};  // rescale = identity
  return c;
}

// The values the decisions compared with the threshold (first_block: the
// metric; teacache with the identity rescale: the unit's accumulated value
// before the step plus its metric; not at the forced first and last steps)
// stay clear of it, so a layout's rounding (within 1e-6) cannot decide
// otherwise than one process.
void check_clear_of_threshold(const nlohmann::json& stats, double threshold, const std::string& kind) {
  std::map<std::pair<int64_t, std::string>, double> accumulated;  // per unit (output, half)
  for (const auto& d : stats["decisions"]) {
    if (d["metric"].is_null() || (kind == "teacache" && d["step"] == 7)) continue;
    const std::pair<int64_t, std::string> unit{d["output"].get<int64_t>(), d.value("half", "")};
    const double compared = d["metric"].get<double>() + (kind == "teacache" ? accumulated[unit] : 0.0);
    CAPTURE(d.dump());
    CHECK(std::fabs(compared - threshold) > 1e-4 * threshold);
    if (kind == "teacache") accumulated[unit] = d["accumulated"].get<double>();
  }
}

// `counters`: compare the forwards counted too (not where the halves decide
// apart on two cp ranks: rank 0 then counts its own half's forwards).
void check_same_decisions(const nlohmann::json& got, const nlohmann::json& want, bool counters) {
  REQUIRE(got["decisions"].size() == want["decisions"].size());
  for (size_t i = 0; i < want["decisions"].size(); ++i) {
    const auto& a = got["decisions"][i];
    const auto& b = want["decisions"][i];
    CAPTURE(b.dump());
    CHECK(a["step"] == b["step"]);
    CHECK(a["output"] == b["output"]);
    CHECK(a.value("half", "") == b.value("half", ""));
    CHECK(a["computed"] == b["computed"]);
    if (!b["metric"].is_null())
      CHECK(a["metric"].get<double>() == doctest::Approx(b["metric"].get<double>()).epsilon(1e-5));
  }
  if (!counters) return;
  CHECK(got["steps_computed"] == want["steps_computed"]);
  CHECK(got["steps_skipped"] == want["steps_skipped"]);
}

// Wan's `plan` row (2 videos of 9 frames of 48 x 80, CFG, float32), as test_wan_cli.cpp computes it.
double wan_plan_bytes_per_step(const parallel::Layout& layout) {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("wan_tiny"));
  const auto& model = pipe->transformer();
  parallel::Workload work = model.workload(model.latent_shape(48, 80, 9, pipe->vae().factors(), ""));
  work.set_text_tokens(16);  // the cross-attention's text rows (max_sequence_length)
  return parallel::plan_layout(layout, work, 2, true, 4).comm_bytes_per_step_per_rank;
}

struct LayoutCase {
  int ranks;
  const char* sets;
  parallel::Layout layout;
};

void check_family(const Family& f, const std::vector<LayoutCase>& layouts) {
  for (const char* kind : {"first_block", "teacache"}) {
    CAPTURE(std::string(kind));
    testing::TempDir dir(std::string("cache_") + f.fixture);
    const Run probe = run(dir, f, "probe", cache_of(kind, 1e-12));
    const double threshold = threshold_between(probe.stats);
    const Run single = run(dir, f, "single", cache_of(kind, threshold));
    const int64_t computed = single.stats["steps_computed"], skipped = single.stats["steps_skipped"];
    int skipped_decisions = 0, computed_after_first = 0;
    for (const auto& d : single.stats["decisions"]) {
      skipped_decisions += d["computed"] ? 0 : 1;
      computed_after_first += d["computed"] && d["step"] != 0 ? 1 : 0;
    }
    MESSAGE(std::string(f.fixture) << " " << std::string(kind) << " threshold " << threshold << ": forwards computed " << computed
                      << ", skipped " << skipped << "; decisions skipped " << skipped_decisions);
    REQUIRE(skipped_decisions > 0);
    REQUIRE(computed_after_first > 0);
    check_clear_of_threshold(single.stats, threshold, kind);
    CHECK(testing::differing(single.latents, probe.latents) > 0);
    for (const LayoutCase& l : layouts) {
      CAPTURE(std::string(l.sets));
      // The same layout never skipping: what a skip-free run sends.
      const Run never = run(dir, f, "layout_never", cache_of(kind, 1e-12), l.ranks, l.sets);
      const Run got = run(dir, f, "layout", cache_of(kind, threshold), l.ranks, l.sets);
      const bool wan = std::string(f.fixture) == "wan_tiny";
      check_same_decisions(got.stats, single.stats, !(wan && l.layout.cp == 2));
      const double err = testing::rel_l2(got.latents, single.latents);
      MESSAGE("  " << std::string(l.sets) << ": relative L2 to one process " << err);
      CHECK(err < 1e-5);
      // PipeFusion: each stage adds its own layers' kept residual, a sum
      // rounded otherwise than one process's (docs/step-caches.md).
      if (testing::promises_identical(l.layout) && l.layout.pp == 1)
        CHECK_MESSAGE(testing::differing(got.latents, single.latents) == 0, l.sets << ": not bit-identical");
      // Rank 0 sends what the skip-free run sends, less what the cache says it skipped.
      const auto total = [](const Run& r) { return testing::sent_per_step(r.comm) * r.comm["forwards"].get<double>(); };
      CHECK(total(got) == total(never) - got.stats["comm_bytes_skipped"].get<double>());
      CHECK(never.stats["comm_bytes_skipped"].get<double>() == 0);
      if (wan && l.layout.pp == 1) {
        // Every forward sends plan's bytes per step, less what the skipped
        // spans would have sent, plus the cache's own: first_block's sums
        // (2 floats per unit) all-reduced over sp at each step after the
        // first (teacache's time embedding is whole on every rank), and
        // under cp each rank's decisions (12 floats each) gathered once.
        const double forwards = got.comm["forwards"].get<double>();
        const double units = (l.layout.cp == 2 ? 1 : 2) * 2;  // this rank's halves x 2 videos
        double own = 0;
        if (l.layout.sp > 1 && std::string(kind) == "first_block") own += (forwards - 1) * 2 * units * 4;
        if (l.layout.cp == 2) own += forwards * units * 12 * 4;
        const double sent = testing::sent_per_step(got.comm) * forwards;
        const double expected = wan_plan_bytes_per_step(l.layout) * forwards -
                                got.stats["comm_bytes_skipped"].get<double>() + own;
        MESSAGE("  rank 0 sent " << sent << " bytes; plan x forwards - skipped " << expected);
        CHECK(sent == expected);
      }
    }
  }
}

}  // namespace

// Wan's halves decide apart (WanPipeline's "cond" / "uncond" contexts): under
// cp each rank decides its own half with no traffic.
TEST_CASE("step caches on wan: cp2, ulysses sp2, tp2 and sp2 x cp2 make one process's decisions and latents") {
  check_family({"wan_tiny", "run_unipc.json"},
               {{2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.tp=2", {1, 1, 2, parallel::SpMode::kUlysses}},
                {4, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.sp_mode=ulysses",
                 {2, 2, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.pp=2 --set parallel.warmup_steps=8", {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 8}},
                {4, "--set parallel.pp=2 --set parallel.sp=2 --set parallel.sp_mode=ulysses --set parallel.warmup_steps=8",
                 {2, 1, 1, parallel::SpMode::kUlysses, 2, 0, 8}}});
}

TEST_CASE("step caches on latte: dsp sp2, ulysses sp2, cp2 and tp2 make one process's decisions and latents") {
  check_family({"latte_tiny", "run_ddim.json"},
               {{2, "--set parallel.sp=2", {2, 1, 1, parallel::SpMode::kDsp}},
                {2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.tp=2", {1, 1, 2, parallel::SpMode::kUlysses}},
                {2, "--set parallel.pp=2 --set parallel.sp_mode=ulysses --set parallel.warmup_steps=8",
                 {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 8}}});
}

TEST_CASE("step caches on pixart: ulysses sp2, ring sp2 and cp2 make one process's decisions and latents") {
  check_family({"pixart_tiny", "run_ddim.json"},
               {{2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.sp=2 --set parallel.sp_mode=ring", {2, 1, 1, parallel::SpMode::kRing}},
                {2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}},
                {4, "--set parallel.pp=2 --set parallel.cp=2 --set parallel.warmup_steps=8",
                 {1, 2, 1, parallel::SpMode::kUlysses, 2, 0, 8}}});
}

TEST_CASE("step caches on dit: ulysses sp3, cp2 and tp2 make one process's decisions and latents") {
  check_family({"dit_odd", "run_ddim.json"},
               {{3, "--set parallel.sp=3 --set parallel.sp_mode=ulysses", {3, 1, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}},
                {2, "--set parallel.tp=2", {1, 1, 2, parallel::SpMode::kUlysses}},
                {2, "--set parallel.pp=2 --set parallel.warmup_steps=8", {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 8}}});
}

// PipeFusion with patches (2 of them after 2 synchronous steps): a cache
// that never skips changes nothing, bit for bit (the first stage runs every
// patch's first block before the rest: PipeFusion's keys and values are the
// same either way), and one that skips runs through to finite latents
// (PipeFusion with patches is itself approximate: docs/parallel.md).
TEST_CASE("step caches under PipeFusion with patches: never skipping is bit-identical to no cache, skipping runs through") {
  for (const Family f : {Family{"wan_tiny", "run_unipc.json"}, Family{"pixart_tiny", "run_ddim.json"}}) {
    CAPTURE(std::string(f.fixture));
    testing::TempDir dir(std::string("cache_pp_") + f.fixture);
    const std::string pp = "--set parallel.pp=2 --set parallel.patches=2 --set parallel.warmup_steps=2 "
                           "--set parallel.sp_mode=ulysses";
    for (const char* kind : {"first_block", "teacache"}) {
      CAPTURE(std::string(kind));
      const Run never = run(dir, f, "never", cache_of(kind, 1e-12), 2, pp);
      const Run off = run(dir, f, "off", cache_of(kind, 1e-12), 2, pp + " --set cache={}");
      CHECK(testing::differing(never.latents, off.latents) == 0);
      const Run probe = run(dir, f, "probe", cache_of(kind, 1e-12));
      const double threshold = threshold_between(probe.stats);
      const Run got = run(dir, f, "patched", cache_of(kind, threshold), 2, pp);
      int skipped = 0;
      for (const auto& d : got.stats["decisions"]) skipped += d["computed"] ? 0 : 1;
      MESSAGE(std::string(f.fixture) << " " << std::string(kind) << " pp2 patches 2: decisions skipped " << skipped
                                     << ", relative L2 to the single process's cached run "
                                     << testing::rel_l2(got.latents, run(dir, f, "single", cache_of(kind, threshold)).latents));
      CHECK(skipped > 0);
      for (float v : got.latents.to_vector()) REQUIRE(std::isfinite(v));
    }
  }
}

// With PAB: a skipped span runs no PAB branch and its layers' PAB count
// stays (docs/design.md §8); ulysses sp2 and cp2 still make one process's
// decisions and latents, and PAB reuses fewer outputs than without the cache.
TEST_CASE("step caches with PAB on wan: ulysses sp2 and cp2 make one process's decisions and latents") {
  const Family f{"wan_tiny", "run_unipc.json"};
  const std::string pab =
      "--set 'pab={\"spatial\":{\"range\":2,\"threshold\":[0,1000]},\"cross\":{\"range\":3,\"threshold\":[0,1000]}}' "
      "--pab-stats ";
  testing::TempDir dir("cache_pab");
  const Run probe = run(dir, f, "probe", cache_of("first_block", 1e-12), 1, pab + dir.file("probe_pab.json"));
  const double threshold = threshold_between(probe.stats);
  const Run single = run(dir, f, "single", cache_of("first_block", threshold), 1, pab + dir.file("single_pab.json"));
  CHECK(single.stats["steps_skipped"].get<int>() + single.stats["steps_computed"].get<int>() == 8);
  int skipped = 0;
  for (const auto& d : single.stats["decisions"]) skipped += d["computed"] ? 0 : 1;
  REQUIRE(skipped > 0);
  const auto reused = [&](const std::string& file) {
    return nlohmann::json::parse(std::ifstream(dir.file(file)))["kinds"]["spatial"]["reused"].get<int>();
  };
  MESSAGE("wan PAB + first_block " << threshold << ": spatial reuses " << reused("single_pab.json")
                                   << " (PAB alone: " << reused("probe_pab.json") << ")");
  CHECK(reused("single_pab.json") > 0);
  CHECK(reused("single_pab.json") <= reused("probe_pab.json"));
  for (const char* sets : {"--set parallel.sp=2 --set parallel.sp_mode=ulysses", "--set parallel.cp=2"}) {
    CAPTURE(std::string(sets));
    const Run got = run(dir, f, "layout", cache_of("first_block", threshold), 2,
                        std::string(sets) + " " + pab + dir.file("layout_pab.json"));
    check_same_decisions(got.stats, single.stats, false);
    CHECK(testing::differing(got.latents, single.latents) == 0);
    CHECK(reused("layout_pab.json") == reused("single_pab.json"));
  }
}

TEST_CASE("step caches: teacache without coefficients on a model with no published ones is exit 2 naming the field") {
  testing::TempDir dir("cache_bad");
  for (const char* fixture : {"dit_odd", "pixart_tiny", "latte_tiny", "wan_tiny"}) {
    CAPTURE(std::string(fixture));
    const std::string fdir = testing::fixture_dir(fixture);
    const char* config = std::string(fixture) == "wan_tiny" ? "run_unipc.json" : "run_ddim.json";
    const testing::Run r = testing::run_command(
        std::string(DITGEN_EXE) + " --device cpu --config " + fdir + "/reference/" + config + " --set model.path=" +
        fdir + " --output " + dir.file(std::string(fixture) + ".png") +
        " --set 'cache={\"kind\":\"teacache\",\"threshold\":0.1}'");
    CHECK(r.code == 2);
    CHECK(r.output.find(std::string(config) + ": cache.coefficients: required for teacache") != std::string::npos);
    // Every family with published coefficients is listed (issue 43: CogVideoX's were missing).
    CHECK(r.output.find("Wan2.1-T2V-1.3B, Wan2.1-T2V-14B, CogVideoX-2b, CogVideoX-5b and Latte-1") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file(std::string(fixture) + ".png")));
  }
}

// A two-expert model (Wan 2.2 A14B, boundary_ratio 0.875 of 1000 train
// timesteps): the low-noise expert starts with a state of its own, as a
// hook on each transformer would. At the first step below t = 875 (step 3
// of these 8: 999, 954, 900, 833, ...) each of the 4 units (2 outputs x 2
// CFG halves: Wan's halves decide apart) computes with no previous signal:
// exactly those 4 decisions, and only there. With a threshold nothing
// reaches, every other step skips, so the forwards computed are exactly
// step 0 and the switch (first_block), and teacache's forced last step too.
TEST_CASE("step caches on a two-expert model: the second expert starts afresh, every unit at the switch step") {
  const Family f{"wan22_tiny", "run_unipc.json"};
  testing::TempDir dir("cache_experts");
  for (const char* kind : {"first_block", "teacache"}) {
    CAPTURE(std::string(kind));
    const Run got = run(dir, f, "experts", cache_of(kind, 1e9));  // skips whatever it may
    int switch_step = -1;
    for (const auto& d : got.stats["decisions"])
      if (switch_step < 0 && d["timestep"].get<double>() < 875) switch_step = d["step"].get<int>();
    REQUIRE(switch_step > 0);
    int fresh = 0;
    for (const auto& d : got.stats["decisions"]) {
      CAPTURE(d.dump());
      const int step = d["step"].get<int>();
      const bool restart = step == 0 || step == switch_step;
      CHECK(d["metric"].is_null() == restart);  // no previous signal exactly at the two starts
      const bool forced_last = std::string(kind) == "teacache" && step == 7;
      CHECK(d["computed"] == (restart || forced_last));
      if (step == switch_step) ++fresh;
    }
    CHECK(fresh == 4);  // 2 outputs x 2 halves
    const int computed = std::string(kind) == "teacache" ? 3 : 2;
    CHECK(got.stats["steps_computed"] == computed);
    CHECK(got.stats["steps_skipped"] == 8 - computed);
  }
}
