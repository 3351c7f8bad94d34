// The text stage end to end on the committed tiny encoders: raw prompts ->
// preprocessing -> tokenizer -> encoder gives transformers' ids, mask and
// last_hidden_state (tests/fixtures/t5_encoder/, made from the same raw
// prompts); a repeated prompt is encoded once and gets the same rows; the
// placement rule for model.dtype; missing parts are ModelErrors.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "ops/backend.h"
#include "pipeline/text_encoding.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_encoder";

std::vector<std::string> fixture_prompts() {
  std::ifstream in(kDir + "/prompts.json");
  return nlohmann::json::parse(in).get<std::vector<std::string>>();
}

double rel_l2(const float* got, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("text stage: raw prompts to transformers' ids, mask and embeddings") {
  const auto prompts = fixture_prompts();
  for (const std::string model : {"t5_relu", "umt5"}) {
    CAPTURE(model);
    const auto stage = pipeline::TextStage::open(kDir + "/" + model);
    CHECK(stage.default_max_length() == 120);  // no model_index.json: LattePipeline's / PixArt-α's
    const auto expected = io::SafetensorsFile::open(kDir + "/" + model + "/expected.safetensors");
    const Tensor ids = expected->load("ids"), mask = expected->load("mask"), ref = expected->load("embeds_f32");
    const int64_t N = ids.dim(0), L = ids.dim(1);
    REQUIRE(static_cast<int64_t>(prompts.size()) == N);
    const pipeline::PromptEmbeddings got = stage.encode(prompts, L, models::Placement{});
    for (int64_t i = 0; i < N; ++i) {
      CAPTURE(i);
      CHECK(got.tokens.ids[i] == std::vector<int64_t>(ids.data_as<int64_t>() + i * L, ids.data_as<int64_t>() + (i + 1) * L));
      CHECK(got.tokens.mask[i] == std::vector<int64_t>(mask.data_as<int64_t>() + i * L, mask.data_as<int64_t>() + (i + 1) * L));
    }
    CHECK(rel_l2(got.embeds.data(), ref.data_as<float>(), ref.numel()) <= 1e-5);
  }
}

TEST_CASE("text stage: a repeated prompt is encoded once and gets the same rows") {
  const auto stage = pipeline::TextStage::open(kDir + "/t5_relu");
  const pipeline::PromptEmbeddings got = stage.encode({"a cat", "", "A CAT  ", "a cat"}, 16, models::Placement{});
  REQUIRE(got.embeds.dim(0) == 4);
  const int64_t row = got.embeds.numel() / 4;
  CHECK(std::equal(got.embeds.data(), got.embeds.data() + row, got.embeds.data() + 2 * row));
  CHECK(std::equal(got.embeds.data(), got.embeds.data() + row, got.embeds.data() + 3 * row));
  CHECK(got.texts[2] == "a cat");
  CHECK(got.tokens.num_tokens[1] == 1);  // "" is </s> alone
}

TEST_CASE("text stage: model.dtype to the encoder's placement") {
  const models::Placement f32 = pipeline::text_encoder_placement(Device::kCPU, DTypeChoice::kFloat32);
  CHECK(f32.dtype == DType::kF32);
  CHECK(f32.storage() == DType::kF32);
  const models::Placement bf16 = pipeline::text_encoder_placement(Device::kCPU, DTypeChoice::kBFloat16);
  CHECK(bf16.dtype == DType::kBF16);           // bfloat16 GEMMs ...
  CHECK(bf16.storage() == DType::kF32);        // ... between float32 activations
  CHECK(pipeline::text_encoder_placement(Device::kCPU, DTypeChoice::kFloat16).dtype == DType::kF32);
  CHECK(pipeline::text_encoder_placement(Device::kCUDA, DTypeChoice::kBFloat16).dtype == DType::kBF16);
  CHECK(pipeline::text_encoder_placement(Device::kCUDA, DTypeChoice::kAuto).dtype == DType::kBF16);
  const models::Placement cpu_auto = pipeline::text_encoder_placement(Device::kCPU, DTypeChoice::kAuto);
  CHECK((cpu_auto.dtype == DType::kBF16) == ops::cpu_has_bf16());
}

TEST_CASE("text stage: missing parts and a bad max length") {
  testing::TempDir tmp("text_stage");
  CHECK_THROWS_AS(pipeline::TextStage::open(tmp.file("nowhere")), ModelError);
  fs::copy(kDir + "/t5_relu/tokenizer", tmp.path / "tokenizer");
  try {
    pipeline::TextStage::open(tmp.path.string());
    FAIL("no text_encoder/ accepted");
  } catch (const ModelError& e) {
    CHECK(std::string(e.what()).find("text_encoder/config.json") != std::string::npos);
  }
  fs::copy(kDir + "/t5_relu/text_encoder", tmp.path / "text_encoder");
  const auto stage = pipeline::TextStage::open(tmp.path.string());
  CHECK_THROWS_AS(stage.tokenize({"x"}, 0), ConfigError);
  CHECK_THROWS_AS(stage.tokenize({"x"}, pipeline::TextStage::kMaxSequenceLength + 1), ConfigError);
  // A tokenizer with more ids than the encoder has rows.
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream((tmp.path / "text_encoder/config.json").string()));
  cfg["vocab_size"] = 100;
  std::ofstream((tmp.path / "text_encoder/config.json").string()) << cfg.dump();
  try {
    pipeline::TextStage::open(tmp.path.string());
    FAIL("a too-small vocabulary accepted");
  } catch (const ModelError& e) {
    CHECK(std::string(e.what()).find("vocab_size") != std::string::npos);
  }
}
