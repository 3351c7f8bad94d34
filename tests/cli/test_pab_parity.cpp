// PAB from the command line against diffusers' own PAB hook
// (tests/fixtures/pab, made by scripts/fixtures/make_pab_fixtures.py:
// apply_pyramid_attention_broadcast inside CogVideoXPipeline and
// WanPipeline): the case's run config (its pab section as a user writes
// it) on one output with the case's noise row, 8 steps. ditgen's
// --pab-stats counts must equal the hook's decisions counted per kind
// exactly, and the latents must be the hook's within relative L2 1e-4
// while the PAB-off run is more than 10x that far from them (the
// broadcast changed the result, and changed it as diffusers did). Wan with
// CFG: WanPipeline calls the transformer once per half, so the reference
// keeps one hook state per half (the script's docstring says why);
// without CFG the hook runs verbatim.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../ops/test_helpers.h"
#include "fixture_runs.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

std::string pab_fixture(const std::string& file) { return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/pab/" + file; }

void check_case(const std::string& name) {
  CAPTURE(name);
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(pab_fixture(name + ".json")));
  testing::TempDir dir("pab_parity");
  const std::string config = dir.write("run.json", c["ditgen_run"].dump(2));
  const std::string latents = dir.file("latents.safetensors"), stats = dir.file("pab.json");
  const testing::Run r = testing::run_command(
      std::string(DITGEN_EXE) + " --device cpu --threads 2 --quiet --config " + config + " --set model.path=" +
      std::string(DITGEN_SOURCE_DIR) + "/" + c["fixture"].get<std::string>() +
      " --init-noise " + std::string(DITGEN_SOURCE_DIR) + "/" + c["noise"]["file"].get<std::string>() +
      " --output " + dir.file("out.png") + " --save-latents " + latents + " --pab-stats " + stats);
  REQUIRE_MESSAGE(r.code == 0, r.output);

  // Every kind's (block, step) outputs computed and reused, as the hook decided them.
  const nlohmann::json kinds = nlohmann::json::parse(std::ifstream(stats))["kinds"];
  REQUIRE(kinds.size() == c["counts"].size());
  for (const auto& [kind, want] : c["counts"].items()) {
    CAPTURE(kind);
    CHECK(kinds.at(kind)["computed"] == want["computed"]);
    CHECK(kinds.at(kind)["reused"] == want["reused"]);
  }

  const auto ref = io::SafetensorsFile::open(pab_fixture(name + ".safetensors"));
  const Tensor want = ref->load("latents").to(DType::kF32).clone();
  const Tensor off = ref->load("latents_off").to(DType::kF32).clone();
  const Tensor got = testing::saved_latents(latents);
  REQUIRE(got.shape() == want.shape());
  const double err = testing::rel_l2(got, want), pab_effect = testing::rel_l2(off, want);
  MESSAGE(name << ": relative L2 to diffusers' PAB latents " << err << " (PAB off: " << pab_effect << ")");
  CHECK(err < 1e-4);
  CHECK(pab_effect > 10 * err);
}

}  // namespace

TEST_CASE("PAB parity: CogVideoX (spatial = the joint attention) equals diffusers' hook, CFG in one forward") {
  check_case("cogvideox");
}
TEST_CASE("PAB parity: Wan (spatial and cross) equals diffusers' hook, one hook state per CFG half") {
  check_case("wan");
}
TEST_CASE("PAB parity: Wan without CFG equals diffusers' hook verbatim") { check_case("wan_no_cfg"); }
