// Step caches against their references (tests/fixtures/step_cache, made by
// scripts/fixtures/make_step_cache_fixtures.py): First-Block Cache against
// diffusers 0.42.1's apply_first_block_cache inside DiTPipeline,
// PixArtAlphaPipeline (both under one cache context: the CFG halves decide
// together) and WanPipeline (its "cond" and "uncond" contexts: each half
// alone), Latte against ditgen's rule re-implemented over diffusers'
// LatteTransformer3DModel, and CogVideoX against ditgen's rule (the metric
// over the joint text and video rows) around the blocks of diffusers'
// CogVideoXPipeline; TeaCache against the ali-vilab/TeaCache rule
// re-implemented in the script on every family (CogVideoX: its time
// embedding, as TeaCache's cogvideox.py), with a made-up polynomial.
// One output, 10 steps, CFG on: every decision (and its metric) and the
// final latents. The thresholds sit at least 2.9% from any metric, so the
// decisions must agree exactly.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "../temp_dir.h"
#include "config/config.h"
#include "pipeline/pipeline.h"
#include "pipeline/text_fixture_requests.h"

using namespace ditgen;

namespace {

std::string case_path(const std::string& name) {
  return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/step_cache/" + name;
}

pab::StepCacheSettings settings_of(const nlohmann::json& cache) {
  pab::StepCacheSettings s;
  s.kind = cache["kind"] == "teacache" ? CacheKind::kTeaCache : CacheKind::kFirstBlock;
  s.threshold = cache["threshold"].get<double>();
  if (cache.contains("coefficients")) s.coefficients = cache["coefficients"].get<std::vector<double>>();
  return s;
}

void check_case(const std::string& fixture, const std::string& name) {
  CAPTURE(name);
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(case_path(name + ".json")));
  // The case's ditgen run config, on the fixture's model.
  testing::TempDir dir("step_cache_parity");
  const std::string config = (dir.path / "run.json").string();
  std::ofstream(config) << c["ditgen_run"].dump(2);
  const RunConfig rc = load_config(config, {"model.path=" + testing::fixture_dir(fixture)});
  const auto pipe = testing::open_fixture_pipeline(fixture);
  pipeline::Request req = pipe->prepare(rc.generate, config);
  req.text_encoder_dtype = DTypeChoice::kFloat32;
  const nlohmann::json& noise = c["run"]["noise"];
  const int64_t row = noise["row"].get<int64_t>();
  req.init_noise = io::SafetensorsFile::open(std::string(DITGEN_SOURCE_DIR) + "/" + noise["file"].get<std::string>())
                       ->load(noise["tensor"].get<std::string>())
                       .slice0(row, row + 1)
                       .to(DType::kF32)
                       .clone();
  req.step_cache = settings_of(c["cache"]);
  const pipeline::Result got = pipe->generate(req);

  const auto& want = c["decisions"];
  const auto& mine = got.pab.step_cache.decisions;
  REQUIRE(mine.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    const pab::StepDecision& d = mine[i];
    CAPTURE(w.dump());
    CHECK(d.step == w["step"].get<int>());
    CHECK(d.output == 0);
    CHECK(d.half == (w["half"].is_null() ? -1 : w["half"] == "cond" ? 0 : 1));
    CHECK(d.computed == w["computed"].get<bool>());
    if (!w["metric"].is_null()) {
      REQUIRE(d.metric >= 0);
      CHECK(d.metric == doctest::Approx(w["metric"].get<double>()).epsilon(1e-4));
    }
    if (w.contains("accumulated")) CHECK(d.accumulated == doctest::Approx(w["accumulated"].get<double>()).epsilon(1e-4));
  }
  const auto ref = io::SafetensorsFile::open(case_path(name + ".safetensors"));
  const Tensor cached = ref->load("latents").to(DType::kF32).clone();
  const Tensor uncached = ref->load("latents_uncached").to(DType::kF32).clone();
  REQUIRE(got.latents.shape() == cached.shape());
  const double err = testing::rel_l2(got.latents, cached), off = testing::rel_l2(uncached, cached);
  MESSAGE(name << ": relative L2 to the reference's cached latents " << err << " (the uncached run's: " << off << ")");
  CHECK(err < 1e-4);
  CHECK(off > 10 * err);  // the cache changed the result, and ditgen changed it as the reference did
}

}  // namespace

TEST_CASE("step cache parity: First-Block Cache on DiT equals diffusers' hook under one cache context") {
  check_case("dit_odd", "dit_fbc");
}
TEST_CASE("step cache parity: First-Block Cache on PixArt equals diffusers' hook under one cache context") {
  check_case("pixart_tiny", "pixart_fbc");
}
TEST_CASE("step cache parity: First-Block Cache on Latte equals the rule re-implemented over diffusers' model") {
  check_case("latte_tiny", "latte_fbc");
}
TEST_CASE("step cache parity: First-Block Cache on Wan equals diffusers' hook, cond and uncond deciding apart") {
  check_case("wan_tiny", "wan_fbc");
}
TEST_CASE("step cache parity: TeaCache on DiT, PixArt, Latte and Wan equals the reference rule") {
  check_case("dit_odd", "dit_teacache");
  check_case("pixart_tiny", "pixart_teacache");
  check_case("latte_tiny", "latte_teacache");
  check_case("wan_tiny", "wan_teacache");
}
TEST_CASE("step cache parity: First-Block Cache on CogVideoX equals ditgen's rule over diffusers' blocks, joint rows") {
  check_case("cogvideox_tiny", "cogvideox_fbc");
}
TEST_CASE("step cache parity: TeaCache on CogVideoX (its time embedding) equals the reference rule") {
  check_case("cogvideox_tiny", "cogvideox_teacache");
}
