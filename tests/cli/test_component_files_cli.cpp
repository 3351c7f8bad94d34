// Runs from four single files (tests/fixtures/wan_quant, made by
// scripts/fixtures/make_wan_quant_fixtures.py; run_single_files.json): the
// transformer as city96's Q8_0 GGUF, the text encoder as ComfyUI's float16
// UMT5, the VAE as ComfyUI's original-names file. The float16 UMT5 and the
// bfloat16 VAE hold the folder's values exactly, so the latents are
// WanPipeline's with the GGUF's weights dequantized by gguf-py (the '_exact'
// reference) to float rounding, and the frames the folder's VAE makes. A
// folder without transformer/, text_encoder/ and vae/ runs the same from
// the published configs the files fit (DITGEN_MODEL_CONFIGS: the real ones
// plus the fixture's), saying which. A file of another part is exit 3
// naming the file, its field and the tensor, before any weight is read.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "../ops/test_helpers.h"
#include "component_folders.h"
#include "fixture_runs.h"
#include "io/image_reader.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = "wan_quant";

std::string noise() { return testing::reference_dir(kFixture) + "pipeline.safetensors"; }

double error_to_exact(const std::string& latents) {
  const Tensor ref = testing::fixture_tensor(kFixture, "pipeline.safetensors", "latents_gguf_Q8_0_exact");
  const Tensor got = testing::saved_latents(latents);
  REQUIRE(got.shape() == ref.shape());
  return testing::rel_l2(got, ref);
}

// The largest difference of two runs' frames (PNG frames <stem>_f000.png ...), in 8-bit steps.
int frames_differ_by(const testing::TempDir& dir, const std::string& a, const std::string& b) {
  int most = 0;
  for (int f = 0; f < 9; ++f) {
    const std::string name = "_f00" + std::to_string(f) + ".png";
    const io::RgbImage x = io::read_input_image(dir.file(a + name)).image.rgb;
    const io::RgbImage y = io::read_input_image(dir.file(b + name)).image.rgb;
    REQUIRE(x.pixels.size() == y.pixels.size());
    for (size_t i = 0; i < x.pixels.size(); ++i) most = std::max(most, std::abs(int(x.pixels[i]) - int(y.pixels[i])));
  }
  return most;
}

}  // namespace

TEST_CASE("component files CLI: GGUF transformer, float16 UMT5 and original-names VAE give WanPipeline's run") {
  testing::TempDir tmp("component_files_cli");
  const testing::Run files = testing::run_fixture(
      tmp, kFixture, "run_single_files.json",
      "--init-noise " + noise() + " --save-latents " + tmp.file("files.safetensors"), 1, "", "files.png");
  REQUIRE_MESSAGE(files.code == 0, files.output);
  const double err = error_to_exact(tmp.file("files.safetensors"));
  MESSAGE("latents from the four files: relative L2 to WanPipeline on gguf-py's weights " << err);
  CHECK(err < 1e-5);

  // The folder's text encoder and VAE (run_gguf.json): the same latents, the same frames.
  const testing::Run folder = testing::run_fixture(
      tmp, kFixture, "run_gguf.json", "--init-noise " + noise() + " --save-latents " + tmp.file("folder.safetensors"),
      1, "", "folder.png");
  REQUIRE_MESSAGE(folder.code == 0, folder.output);
  CHECK(testing::rel_l2(testing::saved_latents(tmp.file("files.safetensors")),
                        testing::saved_latents(tmp.file("folder.safetensors"))) < 1e-5);
  const int frames = frames_differ_by(tmp, "files", "folder");
  MESSAGE("frames from the VAE file and from vae/: at most " << frames << " 8-bit steps apart");
  CHECK(frames <= 1);
}

TEST_CASE("component files CLI: a folder without the parts' configs runs from the published ones, saying which") {
  testing::TempDir tmp("component_files_published");
  const fs::path published = testing::published_with_tiny(tmp), model = testing::folder_without_parts(tmp);

  const std::string run = "DITGEN_MODEL_CONFIGS=" + published.string() + " " + DITGEN_EXE +
                          " --device cpu --threads 2 --config " + testing::reference_dir(kFixture) +
                          "run_single_files.json --set model.path=" + model.string() + " --output " +
                          tmp.file("x.png") + " --init-noise " + noise() + " --save-latents " +
                          tmp.file("latents.safetensors");
  const testing::Run r = testing::run_command(run);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(error_to_exact(tmp.file("latents.safetensors")) < 1e-5);
  for (const char* part : {"transformer", "text_encoder", "vae"}) {
    CAPTURE(part);
    const std::string note = std::string("/config.json is missing; read as ") + published.string() + "/WanTiny/" +
                             part + "/config.json, the published config whose tensor shapes the file matches";
    CHECK_MESSAGE(r.output.find("ditgen: note: ") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find(model.string() + "/" + part + note) != std::string::npos, r.output);
  }

  // Without the fixture's configs, nothing published fits the tiny files: exit 3.
  const testing::Run none = testing::run_command(
      DITGEN_EXE + std::string(" --device cpu --config ") + testing::reference_dir(kFixture) +
      "run_single_files.json --set model.path=" + model.string() + " --output " + tmp.file("y.png"));
  CHECK(none.code == 3);
  CHECK_MESSAGE(none.output.find("model.transformer: " + model.string() +
                                 "/transformer/config.json is missing, and no published transformer config") !=
                    std::string::npos,
                none.output);
  CHECK_FALSE(fs::exists(tmp.file("y_f000.png")));
}

TEST_CASE("component files CLI: another part's file is exit 3 naming the file, the field and the tensor") {
  testing::TempDir tmp("component_files_bad");
  struct Case {
    std::string field, file, says;
  };
  for (const Case& c :
       {Case{"model.text_encoder", "wan_2.1_vae_tiny.safetensors", "missing tensor 'shared.weight'"},
        Case{"model.text_encoder", "wan2.1-t2v-tiny-Q8_0.gguf", "'general.architecture' is 'wan', expected 't5encoder'"},
        Case{"model.vae", "umt5_tiny_fp16.safetensors", "missing tensor 'post_quant_conv.weight'"},
        Case{"model.vae", "umt5-tiny-encoder-Q8_0.gguf", "missing tensor 'post_quant_conv.weight'"},
        Case{"model.vae", "wan2.1_t2v_tiny_bf16.safetensors", "missing tensor 'post_quant_conv.weight'"},
        Case{"model.transformer", "umt5_tiny_fp16.safetensors", "missing tensor 'patch_embedding.weight'"}}) {
    CAPTURE(c.field);
    CAPTURE(c.file);
    const testing::Run r =
        testing::run_fixture(tmp, kFixture, "run_single_files.json", "--set " + c.field + "=" + testing::wan_quant_file(c.file));
    CHECK(r.code == 3);
    CHECK_MESSAGE(r.output.find(testing::wan_quant_file(c.file) + ": " + c.field + ": ") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find(c.says) != std::string::npos, r.output);
    CHECK_FALSE(fs::exists(tmp.file("video_f000.png")));
  }
}
