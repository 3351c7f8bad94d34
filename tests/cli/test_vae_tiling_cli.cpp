// vae.tiling from the command line (docs/vae-tiling.md), on the Wan fixture
// (tests/fixtures/wan_tiny, 48 x 80 videos: 6 x 10 latents): "auto" under a
// --memory-limit the untiled decode's estimate is over tiles the decode and
// says so in one line on stderr (not under --quiet); a roomy limit or "off"
// do not; sizes the VAE cannot take and a bad --memory-limit are exit 2
// naming them. (That the tiles are diffusers': tests/models/test_vae_tiling.cpp.)
#include <doctest/doctest.h>

#include <string>

#include "../models/fixture.h"
#include "fixture_runs.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

// The fixture's run without --quiet (run_fixture passes it), so the notes show.
testing::Run run_loud(const testing::TempDir& dir, const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 --config " +
                              testing::reference_dir("wan_tiny") + "run_unipc.json --set model.path=" +
                              testing::fixture_dir("wan_tiny") + " --output " + dir.file("video.png") + " " + args);
}

const std::string kSmallTiles =
    " --set vae.tile_sample_min_height=32 --set vae.tile_sample_min_width=32"
    " --set vae.tile_sample_stride_height=24 --set vae.tile_sample_stride_width=24";

}  // namespace

TEST_CASE("vae tiling CLI: auto over the memory limit tiles and says so, off and a roomy limit do not") {
  testing::TempDir tmp("vae_tiling_cli");
  const std::string noise = " --init-noise " + testing::reference_dir("wan_tiny") + "noise.safetensors";
  const testing::Run tiled = run_loud(tmp, noise + kSmallTiles + " --memory-limit 0.0001");
  REQUIRE_MESSAGE(tiled.code == 0, tiled.output);
  CHECK_MESSAGE(tiled.output.find("ditgen: vae: tiled decode (vae.tiling auto): the untiled decode of 80x48 would "
                                  "need about") != std::string::npos,
                tiled.output);
  CHECK(tiled.output.find("tiles of 32x32") != std::string::npos);
  for (const std::string& args : {kSmallTiles + " --memory-limit 64", kSmallTiles + " --set vae.tiling=off"}) {
    CAPTURE(args);
    const testing::Run whole = run_loud(tmp, noise + args);
    REQUIRE_MESSAGE(whole.code == 0, whole.output);
    CHECK(whole.output.find("tiled decode") == std::string::npos);
  }
}

TEST_CASE("vae tiling CLI: bad sizes and limits are exit 2 naming them") {
  testing::TempDir tmp("vae_tiling_bad");
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--set vae.tile_sample_min_height=100", "vae.tile_sample_min_height: 100 is not a multiple of 8"},
      {"--set vae.tile_sample_stride_width=512", "vae.tile_sample_stride_width: 512 is over the tile's side 256"},
      {"--set vae.tiling=maybe", "vae.tiling"},
      {"--memory-limit -1", "--memory-limit"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const testing::Run r = testing::run_fixture(tmp, "wan_tiny", "run_unipc.json", c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, r.output);
  }
}
