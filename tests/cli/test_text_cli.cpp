// A text-to-image run from the command line (PixArt, tests/fixtures/
// pixart_tiny): the fixture's run config with --init-noise gives diffusers'
// latents; --prompt / --negative-prompt override the config; the PNGs carry
// the prompt (and the negative prompt) in webui's parameters text.
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

testing::Run run_ditgen(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 " + args);
}

}  // namespace

TEST_CASE("text-to-image: PixArt run config, --init-noise, latents match diffusers, prompts in the PNGs") {
  testing::TempDir tmp("pixart_cli");
  const std::string ref = testing::fixture_dir("pixart_tiny") + "/reference/";
  const std::string latents = tmp.file("latents.safetensors");
  const std::string out = tmp.file("img.png");
  const testing::Run r = run_ditgen("--config " + ref + "run_dpm.json --set model.path=\\\"" +
                                testing::fixture_dir("pixart_tiny") + "\\\" --init-noise " + ref +
                                "noise.safetensors --save-latents " + latents + " --output " + out + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const Tensor got = io::SafetensorsFile::open(latents)->load("latents").clone();
  CHECK(testing::rel_l2(got, testing::fixture_tensor("pixart_tiny", "expected.safetensors", "latents_dpm")) < 1e-4);
  const std::string png = read_file(tmp.file("img_0001.png"));
  CHECK(png.find("A Cat walking on the GRASS  \nSteps: 4, Sampler: dpmpp_2m, CFG scale: 4.5") != std::string::npos);
  CHECK(png.find("Size: 80x80, Model: pixart_tiny") != std::string::npos);

  // --prompt replaces the config's prompts (one output each), --negative-prompt its negative.
  const testing::Run p = run_ditgen("--config " + ref + "run_dpm.json --set model.path=\\\"" +
                                testing::fixture_dir("pixart_tiny") + "\\\" --prompt 'a blue square' " +
                                "--negative-prompt blurry --steps 2 --output " + tmp.file("p.png") + " --quiet");
  REQUIRE_MESSAGE(p.code == 0, p.output);
  CHECK(fs::exists(tmp.file("p.png")));
  CHECK(read_file(tmp.file("p.png")).find("a blue square\nNegative prompt: blurry\nSteps: 2") != std::string::npos);
}

TEST_CASE("text-to-image: a text model given class labels, and a class model given prompts, exit 2") {
  testing::TempDir tmp("text_cli_bad");
  const std::string ref = testing::fixture_dir("pixart_tiny") + "/reference/";
  const testing::Run labels = run_ditgen("--config " + ref + "run_dpm.json --set model.path=\\\"" +
                                     testing::fixture_dir("pixart_tiny") +
                                     "\\\" --set generate.prompts=[] --set generate.class_labels=[1] --output " +
                                     tmp.file("x.png"));
  CHECK(labels.code == 2);
  CHECK(labels.output.find("generate.prompts") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.file("x.png")));
}
