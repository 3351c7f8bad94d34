// Runs from the files people download (tests/fixtures/wan_quant, made by
// scripts/fixtures/make_wan_quant_fixtures.py): the diffusers folder for the
// configs, tokenizer, text encoder and VAE, and model.transformer naming a
// GGUF of city96's layout. From diffusers' noise, 2 UniPC steps of 9 x 32 x
// 32 with guidance 5: the latents of WanPipeline with that GGUF's weights
// dequantized by gguf-py (the '_exact' references, to float rounding) and
// near WanPipeline's own GGUF run; the same under Ulysses (bit for bit), cp and tp, where
// tp splits the quantized matrices along whole blocks (a split that cuts a
// Q4_K block is exit 2 naming the sizes); model.quantize int8 stays near
// the float run; First-Block Cache decides on the blocks as on their
// float32 dequantization; files that are not there or are pickles are
// exit 3.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "fixture_runs.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

const std::string kFixture = "wan_quant";

std::string single_file(const std::string& name) { return testing::fixture_dir(kFixture) + "/single_files/" + name; }

// run_gguf.json (model.transformer: the Q8_0 file) from the fixture's noise, its latents saved.
testing::Run run_gguf(const testing::TempDir& dir, const std::string& latents, const std::string& args,
                      int ranks = 1) {
  return testing::run_fixture(dir, kFixture, "run_gguf.json",
                              "--init-noise " + testing::reference_dir(kFixture) + "pipeline.safetensors --save-latents " +
                                  dir.file(latents) + " " + args,
                              ranks);
}

double error_to(const testing::TempDir& dir, const std::string& latents, const std::string& reference) {
  const Tensor ref = testing::fixture_tensor(kFixture, "pipeline.safetensors", reference);
  const Tensor got = testing::saved_latents(dir.file(latents));
  REQUIRE(got.shape() == ref.shape());
  return testing::rel_l2(got, ref);
}

}  // namespace

TEST_CASE("quantized CLI: a GGUF transformer beside a diffusers folder gives WanPipeline's latents on its weights") {
  testing::TempDir tmp("quantized_cli");
  struct Case {
    std::string file, reference;
  };
  for (const Case& c : {Case{"wan2.1-t2v-tiny-Q8_0.gguf", "latents_gguf_Q8_0"},
                        Case{"wan2.1-t2v-tiny-Q4_K_M.gguf", "latents_gguf_Q4_K_M"}}) {
    CAPTURE(c.file);
    const testing::Run r = run_gguf(tmp, "latents.safetensors", "--set model.transformer=" + single_file(c.file));
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const double exact = error_to(tmp, "latents.safetensors", c.reference + "_exact");
    const double diffusers = error_to(tmp, "latents.safetensors", c.reference);
    const double to_float = error_to(tmp, "latents.safetensors", "latents_float32");
    MESSAGE(c.file << ": latents' relative L2 to the exact twin " << exact << ", to diffusers' GGUF run " << diffusers
                   << ", to the float32 folder's " << to_float);
    CHECK(exact < 1e-4);
    CHECK(diffusers < 2e-3);  // diffusers' own GGUF run is 3e-4 (Q8_0) to 5e-4 (Q4_K_M) from the exact twin
    CHECK(to_float > 5e-3);   // the quantization really is in the weights
  }
  // model.quantize int8 on the float folder: W8A8 near the float32 run.
  const testing::Run int8 = run_gguf(tmp, "int8.safetensors", "--set model.transformer=null --set model.quantize=int8");
  REQUIRE_MESSAGE(int8.code == 0, int8.output);
  const double err = error_to(tmp, "int8.safetensors", "latents_float32");
  MESSAGE("model.quantize int8: latents' relative L2 to the float32 run " << err);
  CHECK(err < 3e-2);
  CHECK(err > 1e-5);
}

TEST_CASE("quantized CLI: Ulysses, cp and tp on a Q8_0 transformer give one process's latents") {
  testing::TempDir tmp("quantized_layouts");
  REQUIRE(run_gguf(tmp, "one.safetensors", "").code == 0);
  const Tensor one = testing::saved_latents(tmp.file("one.safetensors"));
  struct Layout {
    std::string sets;
    // Ulysses moves whole rows: the same sums. cp runs each CFG half as a
    // batch of one, tp splits the sums: the band GEMM on block weights
    // blocks those sums by its rows, so float rounding differs.
    double tolerance;
  };
  for (const Layout& l : {Layout{"--set parallel.sp=2 --set parallel.sp_mode=ulysses", 0.0},
                          Layout{"--set parallel.cp=2", 1e-5}, Layout{"--set parallel.tp=2", 1e-5}}) {
    CAPTURE(l.sets);
    const testing::Run r = run_gguf(tmp, "layout.safetensors", l.sets, 2);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const double err = testing::rel_l2(testing::saved_latents(tmp.file("layout.safetensors")), one);
    MESSAGE(l.sets << ": relative L2 to one process " << err);
    CHECK(err <= l.tolerance);
  }
  // tp 2 halves the output projection's 256 columns: 128 is no whole Q4_K block of 256.
  const testing::Run cut = run_gguf(
      tmp, "cut.safetensors", "--set parallel.tp=2 --set model.transformer=" + single_file("wan2.1-t2v-tiny-Q4_K_M.gguf"), 2);
  CHECK(cut.code == 2);
  CHECK_MESSAGE(cut.output.find("is Q4_K, blocks of 256 along its rows") != std::string::npos, cut.output);
  CHECK_MESSAGE(cut.output.find("cuts a block") != std::string::npos, cut.output);
  CHECK_FALSE(std::filesystem::exists(tmp.file("cut.safetensors")));
}

TEST_CASE("quantized CLI: a component file that is not there, is a pickle or is another model's is exit 3") {
  testing::TempDir tmp("quantized_bad");
  const std::string missing = tmp.file("absent.gguf");
  testing::Run r = run_gguf(tmp, "x.safetensors", "--set model.transformer=" + missing);
  CHECK(r.code == 3);
  CHECK_MESSAGE(r.output.find(missing) != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("model.transformer") != std::string::npos, r.output);

  const std::string pickle = tmp.file("wan.pth");
  std::ofstream(pickle) << "PK\x03\x04 not read";
  r = run_gguf(tmp, "x.safetensors", "--set model.transformer=" + pickle);
  CHECK(r.code == 3);
  CHECK_MESSAGE(r.output.find(pickle) != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("pickle") != std::string::npos, r.output);

  // The VAE's file given as the transformer: its first tensor fits no Wan transformer name.
  const std::string vae = single_file("wan_2.1_vae_tiny.safetensors");
  r = run_gguf(tmp, "x.safetensors", "--set model.transformer=" + vae);
  CHECK(r.code == 3);
  CHECK_MESSAGE(r.output.find(vae) != std::string::npos, r.output);
  CHECK_FALSE(std::filesystem::exists(tmp.file("x.safetensors")));
}

// First-Block Cache reads the first block's output: on a Q8_0 transformer
// it decides exactly as on the same weights dequantized into a float32
// file (ditgen convert --type f32: gguf-py's values), and the latents
// agree to float rounding. The threshold sits where no step's metric is
// within 1% of it, so rounding cannot flip a decision.
TEST_CASE("quantized CLI: First-Block Cache on a Q8_0 transformer decides as on its float32 dequantization") {
  testing::TempDir tmp("quantized_cache");
  const std::string gguf = single_file("wan2.1-t2v-tiny-Q8_0.gguf"), f32 = tmp.file("q8_0_as_f32.safetensors");
  const testing::Run conv = testing::run_command(std::string(DITGEN_EXE) + " convert --input " + gguf +
                                                 " --component transformer --type f32 --output " + f32 + " --quiet");
  REQUIRE_MESSAGE(conv.code == 0, conv.output);
  const double threshold = 0.5;  // the tiny random model's metrics: 0.41 to 0.61
  const auto run = [&](const std::string& file, const std::string& name) {
    const std::string stats = tmp.file(name + ".json");
    const testing::Run r = run_gguf(tmp, name + ".safetensors",
                                    "--steps 8 --set model.transformer=" + file +
                                        " --set 'cache={\"kind\": \"first_block\", \"threshold\": " +
                                        std::to_string(threshold) + "}' --cache-stats " + stats);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    return nlohmann::json::parse(std::ifstream(stats));
  };
  const nlohmann::json blocks = run(gguf, "blocks"), dense = run(f32, "dense");
  REQUIRE(blocks["decisions"].size() == dense["decisions"].size());
  int skipped = 0;
  for (size_t i = 0; i < blocks["decisions"].size(); ++i) {
    const nlohmann::json &b = blocks["decisions"][i], &d = dense["decisions"][i];
    CAPTURE(b.dump());
    CAPTURE(d.dump());
    CHECK(b["computed"] == d["computed"]);
    if (b["metric"].is_null()) continue;
    CHECK(std::fabs(b["metric"].get<double>() - threshold) > 0.01 * threshold);
    CHECK(b["metric"].get<double>() == doctest::Approx(d["metric"].get<double>()).epsilon(1e-4));
    skipped += b["computed"].get<bool>() ? 0 : 1;
  }
  CHECK(skipped > 0);
  const double err = testing::rel_l2(testing::saved_latents(tmp.file("blocks.safetensors")),
                                     testing::saved_latents(tmp.file("dense.safetensors")));
  MESSAGE("First-Block Cache, Q8_0 blocks against their float32 file: " << skipped << " skips, latents' relative L2 "
                                                                         << err);
  CHECK(err < 1e-5);
}
