// vae.tiling from the command line (docs/vae-tiling.md), on the Wan fixture
// at 480 x 832, one frame (60 x 104 latents; 128 x 128 tiles every 96):
// "auto" under a --memory-limit that the untiled decode's estimate takes
// the run over, but the tiled one does not, tiles the decode and says so
// in one line on stderr (not under --quiet) and in the outputs' run record;
// a roomy limit or "off" do not; a limit under even the tiled run's peak,
// sizes the VAE cannot take and a bad --memory-limit are exit 2 naming
// them, the limit with the smallest that works. (That the tiles are
// diffusers': tests/models/test_vae_tiling.cpp; the memory plan's figures:
// tests/pipeline/test_run_memory.cpp.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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

const std::string kLarge =
    " --set generate.height=480 --set generate.width=832 --set generate.frames=1"
    " --set vae.tile_sample_min_height=128 --set vae.tile_sample_min_width=128"
    " --set vae.tile_sample_stride_height=96 --set vae.tile_sample_stride_width=96";

// plan's peak for the fixture's run with `args` (bytes).
double planned_peak(const std::string& args) {
  const testing::Run plan = testing::run_command(std::string(DITGEN_EXE) + " plan --no-calibrate --device cpu "
                                                 "--threads 2 --config " + testing::reference_dir("wan_tiny") +
                                                 "run_unipc.json --set model.path=" + testing::fixture_dir("wan_tiny") +
                                                 " " + args);
  REQUIRE_MESSAGE(plan.code == 0, plan.output);
  const std::string head = "peak memory per rank: rank 0 ";
  const size_t at = plan.output.find(head);
  REQUIRE_MESSAGE(at != std::string::npos, plan.output);
  size_t used = 0;
  const double value = std::stod(plan.output.substr(at + head.size()), &used);
  return value * (plan.output.compare(at + head.size() + used + 1, 3, "GiB") == 0 ? 1024.0 : 1.0) * 1024 * 1024;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("vae tiling CLI: auto over the memory limit tiles and says so, off and a roomy limit do not") {
  testing::TempDir tmp("vae_tiling_cli");
  // A limit halfway between the run's planned peaks with tiles and without
  // (here about 0.2 and 0.47 GiB: the untiled decode's estimate alone is
  // 0.27 GiB) tiles.
  const double with_tiles = planned_peak(kLarge + " --set vae.tiling=on");
  const double without = planned_peak(kLarge + " --set vae.tiling=off");
  REQUIRE(with_tiles < without);
  const std::string limit = std::to_string((with_tiles + without) / 2 / (1024.0 * 1024 * 1024));
  const testing::Run tiled = run_loud(tmp, kLarge + " --memory-limit " + limit);
  REQUIRE_MESSAGE(tiled.code == 0, tiled.output);
  CHECK_MESSAGE(tiled.output.find("ditgen: vae: tiled decode (vae.tiling auto): the untiled decode of 832x480 would "
                                  "need about") != std::string::npos,
                tiled.output);
  CHECK(tiled.output.find("the memory limit leaves it (") != std::string::npos);
  CHECK(tiled.output.find("tiles of 128x128") != std::string::npos);
  // The decision in the outputs' run record ("ditgen_run").
  const std::string png = read_file(tmp.file("video_0000.png"));
  CHECK_MESSAGE(png.find(R"("vae_tiling":{"stride":[96,96],"tile":[128,128],"tiled":true,"tiling":"auto","why":)"
                         R"("vae.tiling auto: the untiled decode of 832x480 would need about)") != std::string::npos,
                png.substr(0, 2000));
  for (const std::string& args : {kLarge + " --memory-limit 64", kLarge + " --memory-limit " + limit +
                                                                     " --set vae.tiling=off"}) {
    CAPTURE(args);
    const testing::Run whole = run_loud(tmp, args);
    if (args.find("off") != std::string::npos) {  // untiled, the run is over the limit: refused
      CHECK(whole.code == 2);
      CHECK(whole.output.find("ditgen: error: --memory-limit: ") != std::string::npos);
      continue;
    }
    REQUIRE_MESSAGE(whole.code == 0, whole.output);
    CHECK(whole.output.find("tiled decode") == std::string::npos);
    CHECK(read_file(tmp.file("video_0000.png")).find(R"("vae_tiling":{"tiled":false,"tiling":"auto","why":)"
                                                     R"("vae.tiling auto: the untiled decode of 832x480 needs )") !=
          std::string::npos);
  }
}

TEST_CASE("vae tiling CLI: a --memory-limit under the run's peak is exit 2 with the smallest limit that works") {
  testing::TempDir tmp("vae_tiling_limit");
  const double peak = planned_peak(kLarge + " --set vae.tiling=on");
  const testing::Run low = run_loud(tmp, kLarge + " --memory-limit " + std::to_string(peak / 2 / (1 << 30)));
  CHECK(low.code == 2);
  const std::string tail = "the smallest limit that works is --memory-limit ";
  const size_t at = low.output.find(tail);
  REQUIRE_MESSAGE(at != std::string::npos, low.output);
  CHECK(low.output.find("ditgen: error: --memory-limit: ") != std::string::npos);
  CHECK(low.output.find("(rank 0, VAE decode, with a tiled VAE decode;") != std::string::npos);
  const double smallest = std::stod(low.output.substr(at + tail.size()));
  CHECK(smallest * (1 << 30) >= peak * 0.98);
  // A hundredth more than it (the process's own bytes vary by a MiB or so
  // between runs, the figure is rounded up to a hundredth of a GiB) runs.
  const testing::Run enough = run_loud(tmp, kLarge + " --memory-limit " + std::to_string(smallest + 0.01));
  CHECK_MESSAGE(enough.code == 0, enough.output);
  CHECK(std::filesystem::exists(tmp.file("video_0000.png")));
}

TEST_CASE("vae tiling CLI: bad sizes and limits are exit 2 naming them") {
  testing::TempDir tmp("vae_tiling_bad");
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--set vae.tile_sample_min_height=100", "vae.tile_sample_min_height: 100 is not a multiple of 8 (the pixels "
                                               "per latent of this autoencoder_kl_wan VAE); 96 or 104 would do"},
      {"--set vae.tile_sample_stride_width=512", "vae.tile_sample_stride_width: 512 is over the tile's side 256 "
                                                 "(tiles would leave gaps); at most 256 works"},
      {"--set vae.tiling=off --set vae.tile_sample_min_width=20", "vae.tile_sample_min_width: 20 is not a multiple"},
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
