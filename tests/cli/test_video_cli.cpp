// Text-to-video from the command line (Latte, tests/fixtures/latte_tiny):
// the fixture's run config with --init-noise gives diffusers' latents and
// writes each video's frames as PNGs (stem_0000_f000.png ...) with the
// prompt, size and frame count in webui's parameters text, plus a
// filmstrip contact sheet; --frames; under mpirun the cp2 and tp2 layouts
// give the same latents (sp layouts: test_video_layouts.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kRef = testing::fixture_dir("latte_tiny") + "/reference/";

// ditgen (or mpirun -np ranks ditgen) on the fixture's DDIM run config.
testing::Run run_latte(const testing::TempDir& dir, const std::string& args, int ranks = 1) {
  const std::string launcher = ranks > 1 ? std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " +
                                               std::to_string(ranks) + " -x OMP_NUM_THREADS=1 "
                                         : "";
  const std::string cmd = launcher + DITGEN_EXE + " --device cpu --threads " + (ranks > 1 ? "1" : "2") +
                          " --config " + kRef + "run_ddim.json --set model.path=" +
                          testing::fixture_dir("latte_tiny") + " --output " + dir.file("img.png") + " --quiet " + args;
  return testing::run_command(cmd);
}

double latents_error(const std::string& file) {
  const Tensor got = io::SafetensorsFile::open(file)->load("latents").clone();
  const Tensor ref = testing::fixture_tensor("latte_tiny", "expected.safetensors", "latents_ddim");
  REQUIRE(got.shape() == ref.shape());
  return testing::rel_l2(got, ref);
}

}  // namespace

TEST_CASE("text-to-video: Latte run config, --init-noise, latents match diffusers, frames as PNGs") {
  testing::TempDir tmp("latte_cli");
  const std::string latents = tmp.file("latents.safetensors");
  const testing::Run r = run_latte(tmp, "--init-noise " + kRef + "noise.safetensors --save-latents " + latents +
                                            " --set output.grid=true");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = latents_error(latents);
  MESSAGE("latte_tiny CLI latents_ddim: relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
  // Two videos of three frames: img_0000_f000.png ... img_0001_f002.png, and the filmstrip sheet.
  for (const char* name : {"img_0000_f000.png", "img_0000_f001.png", "img_0000_f002.png", "img_0001_f000.png",
                           "img_0001_f002.png", "img_grid.png"}) {
    CAPTURE(name);
    CHECK(fs::exists(tmp.file(name)));
  }
  CHECK_FALSE(fs::exists(tmp.file("img_0000_f003.png")));
  CHECK_FALSE(fs::exists(tmp.file("img_0000.png")));
  const std::string png = read_file(tmp.file("img_0000_f001.png"));
  CHECK(png.find("a red circle moving left\nSteps: 3, Sampler: ddim, CFG scale: 7.5, Seed: 0") != std::string::npos);
  CHECK(png.find("Size: 80x80, Frames: 3, Model: latte_tiny") != std::string::npos);
  CHECK(read_file(tmp.file("img_0001_f000.png")).find("a cat\nSteps: 3") != std::string::npos);
}

TEST_CASE("text-to-video: --frames 1 is a still image through the video model, bad noise shapes say (C, F, h, w)") {
  testing::TempDir tmp("latte_cli_frames");
  const testing::Run still = run_latte(tmp, "--frames 1 --steps 1 --prompt 'a cat'");
  REQUIRE_MESSAGE(still.code == 0, still.output);
  CHECK(fs::exists(tmp.file("img.png")));
  CHECK_FALSE(fs::exists(tmp.file("img_f000.png")));

  const testing::Run noise = run_latte(tmp, "--frames 2 --init-noise " + kRef + "noise.safetensors");
  CHECK(noise.code == 2);
  CHECK(noise.output.find("expected [2, 4, 2, 10, 10] (outputs, C, F, h, w)") != std::string::npos);

  const testing::Run tokens = run_latte(tmp, "--set generate.max_sequence_length=300");
  CHECK(tokens.code == 2);
  CHECK(tokens.output.find("generate.max_sequence_length: 300") != std::string::npos);
}

TEST_CASE("latte layout cp2 gives diffusers' latents") {
  testing::TempDir tmp("latte_cp2");
  const std::string latents = tmp.file("latents.safetensors");
  const testing::Run r = run_latte(tmp, "--set parallel.cp=2 --init-noise " + kRef +
                                            "noise.safetensors --save-latents " + latents, 2);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = latents_error(latents);
  MESSAGE("latte cp2: relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
}

TEST_CASE("latte layout tp2 gives diffusers' latents") {
  testing::TempDir tmp("latte_tp2");
  const std::string latents = tmp.file("latents.safetensors");
  const testing::Run r = run_latte(tmp, "--set parallel.tp=2 --init-noise " + kRef +
                                            "noise.safetensors --save-latents " + latents, 2);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = latents_error(latents);
  MESSAGE("latte tp2: relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
}
