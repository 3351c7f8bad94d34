// `ditgen encode` as a user runs it (docs/design.md §1): on the committed tiny
// encoders its ids_i / mask_i / embeds_i equal transformers' (made from the
// same raw prompts by scripts/fixtures/make_t5_encoder_fixtures.py), from --prompt
// and from --prompt-file; on the Wan fixture they equal what diffusers'
// WanPipeline feeds its transformer (cleaned prompts, transformers 5's
// tokenizer, embeddings zero past the prompt's tokens, 512 by default);
// and every bad input exits with its code, names the file or field, and
// leaves no output file behind.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_encoder";

testing::Run encode(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " encode --device cpu --threads 2 " + args);
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> fixture_prompts() {
  std::ifstream in(kFixtures + "/prompts.json");
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

// Every prompt's ids, mask and embeddings in `file` against the fixture's.
void check_against_transformers(const std::string& file, const std::string& model, const std::string& ref_name,
                                double tolerance, bool ids_only = false) {
  const auto got = io::SafetensorsFile::open(file);
  const auto ref = io::SafetensorsFile::open(kFixtures + "/" + model + "/expected.safetensors");
  const Tensor ids = ref->load("ids"), mask = ref->load("mask"), embeds = ref->load(ref_name);
  const int64_t N = ids.dim(0), L = ids.dim(1), D = embeds.dim(2);
  for (int64_t i = 0; i < N; ++i) {
    CAPTURE(i);
    const std::string n = std::to_string(i);
    const Tensor gi = got->load("ids_" + n), gm = got->load("mask_" + n);
    REQUIRE(gi.dtype() == DType::kI64);
    REQUIRE(gi.shape() == Shape{L});
    CHECK(std::equal(gi.data_as<int64_t>(), gi.data_as<int64_t>() + L, ids.data_as<int64_t>() + i * L));
    CHECK(std::equal(gm.data_as<int64_t>(), gm.data_as<int64_t>() + L, mask.data_as<int64_t>() + i * L));
    if (ids_only) {
      CHECK_FALSE(got->contains("embeds_" + n));
      continue;
    }
    const Tensor ge = got->load("embeds_" + n);
    REQUIRE(ge.shape() == Shape{L, D});
    CHECK(rel_l2(ge.data_as<float>(), embeds.data_as<float>() + i * L * D, L * D) <= tolerance);
  }
  CHECK_FALSE(got->contains("ids_" + std::to_string(N)));
}

}  // namespace

TEST_CASE("encode: --prompt gives transformers' ids, masks and embeddings (float32 and bfloat16)") {
  testing::TempDir tmp("encode");
  std::string prompts;
  for (const std::string& p : fixture_prompts()) prompts += " --prompt " + quoted(p);
  const std::string out = tmp.file("e.safetensors");
  const testing::Run r =
      encode("--model " + kFixtures + "/t5_gated --max-sequence-length 24 --dtype float32 --output " + out + prompts);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_against_transformers(out, "t5_gated", "embeds_f32", 1e-5);
  const auto meta = io::SafetensorsFile::open(out)->metadata();
  CHECK(meta.at("max_sequence_length") == "24");
  CHECK(meta.at("dtype") == "float32");

  const testing::Run b =
      encode("--model " + kFixtures + "/umt5 --max-sequence-length 24 --dtype bfloat16 --output " + out + prompts);
  REQUIRE(b.code == 0);
  check_against_transformers(out, "umt5", "embeds_bf16", 2e-2);
  CHECK(io::SafetensorsFile::open(out)->metadata().at("dtype") == "bfloat16");
}

TEST_CASE("encode: --prompt-file and --ids-only") {
  testing::TempDir tmp("encode_file");
  {
    std::ofstream f(tmp.file("prompts.jsonl"));
    for (const std::string& p : fixture_prompts()) f << nlohmann::json{{"prompt", p}}.dump() << "\n";
  }
  const std::string out = tmp.file("ids.safetensors");
  const testing::Run r = encode("--model " + kFixtures + "/t5_relu --max-sequence-length 24 --ids-only --prompt-file " +
                                tmp.file("prompts.jsonl") + " --output " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_against_transformers(out, "t5_relu", "embeds_f32", 0, /*ids_only=*/true);
  // The default length is the pipeline's: 120 without a model_index.json.
  const testing::Run d = encode("--model " + kFixtures + "/t5_relu --ids-only --prompt cat --output " + out);
  REQUIRE(d.code == 0);
  CHECK(io::SafetensorsFile::open(out)->load("ids_0").numel() == 120);
}

TEST_CASE("encode: bad inputs exit 2 or 3, name the culprit, and write nothing") {
  testing::TempDir tmp("encode_bad");
  const std::string out = tmp.file("out.safetensors");
  const std::string model = kFixtures + "/t5_relu";
  struct Case {
    std::string args;
    int code;
    std::string says;
  };
  std::ofstream(tmp.file("bad_utf8.txt")) << "fine\nbad \xff\xfe prompt\n";
  std::ofstream(tmp.file("empty.txt")) << "# nothing\n\n";
  std::ofstream(tmp.file("long.txt")) << std::string(70000, 'a') << "\n";
  // A model whose spiece.model is corrupt, one with only tokenizer.json, one
  // whose config disagrees with its tensors.
  fs::copy(model, tmp.path / "corrupt", fs::copy_options::recursive);
  std::ofstream((tmp.path / "corrupt/tokenizer/spiece.model").string(), std::ios::trunc) << "not a model";
  fs::copy(model, tmp.path / "json_only", fs::copy_options::recursive);
  fs::remove(tmp.path / "json_only/tokenizer/spiece.model");
  std::ofstream((tmp.path / "json_only/tokenizer/tokenizer.json").string()) << "{}";
  fs::copy(model, tmp.path / "sizes", fs::copy_options::recursive);
  {
    const std::string cfg_path = (tmp.path / "sizes/text_encoder/config.json").string();
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(cfg_path));
    cfg["d_model"] = 48;
    std::ofstream(cfg_path) << cfg.dump();
  }
  const Case cases[] = {
      {"--model " + model + " --prompt-file " + tmp.file("bad_utf8.txt"), 2, "bad_utf8.txt:2: invalid UTF-8"},
      {"--model " + model + " --prompt-file " + tmp.file("empty.txt"), 2, "no prompts"},
      {"--model " + model + " --prompt-file " + tmp.file("long.txt"), 2, "long.txt:1"},
      {"--model " + model + " --prompt-file " + tmp.file("missing.txt"), 2, "missing.txt"},
      {"--model " + model + " --prompt \"$(printf 'a\\377')\"", 2, "--prompt #1: invalid UTF-8"},
      {"--model " + model + " --prompt a --max-sequence-length 5000", 2, "max_sequence_length"},
      {"--model " + tmp.file("nowhere") + " --prompt a", 3, "nowhere"},
      {"--model " + tmp.file("corrupt") + " --prompt a", 3, "spiece.model"},
      // A folder with tokenizer.json is read with transformers 5's rules
      // (io/text_tokenizer.h); this one is not a tokenizer.
      {"--model " + tmp.file("json_only") + " --prompt a", 3, "tokenizer.json: model: expected an object"},
      {"--model " + tmp.file("sizes") + " --prompt a", 3, "shared.weight"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const testing::Run r = encode(c.args + " --output " + out);
    INFO(r.output);
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.says) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
  CHECK(fs::is_empty(tmp.path / "corrupt/text_encoder") == false);
}

TEST_CASE("encode: a WanPipeline directory gives the pipeline's ids, masks and zero-padded embeddings") {
  const std::string root = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/wan_tiny";
  const nlohmann::json pipe = nlohmann::json::parse(std::ifstream(root + "/reference/case.json"))["pipeline"];
  const auto prompts = pipe["prompts"].get<std::vector<std::string>>();
  const std::string negative = pipe["negative_prompt"];
  const auto ref = io::SafetensorsFile::open(root + "/reference/expected.safetensors");
  testing::TempDir tmp("encode_wan");
  const std::string out = tmp.file("wan.safetensors");
  const std::string args = " --prompt " + quoted(prompts[0]) + " --prompt " + quoted(prompts[1]) + " --prompt " +
                           quoted(negative) + " --dtype float32 --output " + out;
  const testing::Run r = encode("--model " + root + " --max-sequence-length 16" + args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  {
    const auto got = io::SafetensorsFile::open(out);
    const char* ids[] = {"prompt_ids_0", "prompt_ids_1", "negative_ids"};
    const char* masks[] = {"prompt_mask_0", "prompt_mask_1", "negative_mask"};
    const char* embeds[] = {"prompt_embeds_0", "prompt_embeds_1", "negative_embeds"};
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      const std::string n = std::to_string(i);
      const Tensor gi = got->load("ids_" + n), gm = got->load("mask_" + n), ge = got->load("embeds_" + n);
      const Tensor wi = ref->load(ids[i]), wm = ref->load(masks[i]), we = ref->load(embeds[i]);
      REQUIRE(gi.shape() == wi.shape());
      CHECK(std::equal(gi.data_as<int64_t>(), gi.data_as<int64_t>() + 16, wi.data_as<int64_t>()));
      CHECK(std::equal(gm.data_as<int64_t>(), gm.data_as<int64_t>() + 16, wm.data_as<int64_t>()));
      REQUIRE(ge.shape() == we.shape());
      CHECK(rel_l2(ge.data_as<float>(), we.data_as<float>(), we.numel()) <= 1e-5);
    }
    const auto meta = got->metadata();
    CHECK(meta.at("pipeline") == "WanPipeline");
    CHECK(meta.at("zero_padded") == "true");
    CHECK(meta.at("tokenizer").find("tokenizer.json") != std::string::npos);
  }
  // The pipeline's default length, 512: the first k rows as diffusers', the rest exactly 0.
  const testing::Run d = encode("--model " + root + args);
  INFO(d.output);
  REQUIRE(d.code == 0);
  const auto got = io::SafetensorsFile::open(out);
  CHECK(got->metadata().at("max_sequence_length") == "512");
  for (const auto& [index, name] : {std::pair<int, const char*>{0, "prompt_embeds_512_0_rows"}, {2, "negative_embeds_512_rows"}}) {
    const Tensor ge = got->load("embeds_" + std::to_string(index)), want = ref->load(name);
    REQUIRE(ge.shape() == Shape{512, 32});
    const int64_t k = want.dim(0);
    CHECK(rel_l2(ge.data_as<float>(), want.data_as<float>(), k * 32) <= 1e-5);
    CHECK(std::all_of(ge.data_as<float>() + k * 32, ge.data_as<float>() + 512 * 32, [](float v) { return v == 0.0f; }));
  }
}
