// The T5 tokenizer against transformers' slow T5Tokenizer: every prompt of
// tests/fixtures/t5_tokenizer/ (made by scripts/fixtures/make_t5_tokenizer_fixtures.py)
// id for id and mask for mask, for two tiny SentencePiece models, two
// max_lengths and both `legacy` behaviours; then the bad inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_helpers.h"
#include "temp_dir.h"
#include "io/model_dir.h"
#include "io/t5_tokenizer.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;
using nlohmann::json;
using testing::contains;
using testing::model_error_of;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_tokenizer";

std::vector<std::string> fixture_prompts() {
  return read_json_file(kFixtures + "/prompts.json").get<std::vector<std::string>>();
}

std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ConfigError: ") + e.what() + ">";
  }
  return "<no exception>";
}

// A copy of a fixture tokenizer folder in `dir`/`name`.
std::string copy_tokenizer(const testing::TempDir& dir, const std::string& fixture, const std::string& name) {
  const fs::path to = dir.path / name;
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(kFixtures + "/" + fixture)) fs::copy_file(e.path(), to / e.path().filename());
  return to.string();
}

// Known differences between Debian's libsentencepiece 0.1.97 and the 0.2.3
// wheel transformers ran on: equal-score segmentations (here "1,000,000"
// with "0" and "00" in the vocabulary but not "000": "00"+"0" and "0"+"00"
// score the same up to float rounding) are broken differently by the two
// versions' Viterbi. Both libraries disagree even with themselves across
// contexts ("000" -> 0 00 but "1,000" -> 00 0 in 0.2.3). For these rows only
// the same ids in another order is accepted, nothing else.
struct KnownTie {
  const char* tokenizer;
  bool legacy;
  int64_t max_length;
  size_t prompt;
};
constexpr KnownTie kKnownTies[] = {{"nfkc", false, 120, 25}};

bool known_tie(const json& c, size_t prompt) {
  for (const auto& t : kKnownTies)
    if (c["tokenizer"] == t.tokenizer && c["legacy"] == t.legacy && c["max_length"] == t.max_length && prompt == t.prompt)
      return true;
  return false;
}

// The number of rows of `got` that differ from the case's expected ids and
// masks; the first few are reported.
int mismatches(const T5Tokens& got, const json& c, const std::vector<std::string>& prompts) {
  const int64_t L = c["max_length"].get<int64_t>();
  int bad = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> want = c["ids"][i].get<std::vector<int64_t>>();
    const std::string want_mask = c["mask"][i].get<std::string>();
    const auto n = static_cast<int64_t>(want.size());
    want.resize(L, 0);  // the fixture leaves out the <pad> ids after the mask
    std::string mask;
    for (int64_t m : got.mask[i]) mask += m ? '1' : '0';
    if (known_tie(c, i) && got.ids[i] != want) {
      auto a = got.ids[i], b = want;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a == b && mask == want_mask && got.num_tokens[i] == n) continue;
    }
    if (got.ids[i] != want || mask != want_mask || got.num_tokens[i] != n) {
      if (++bad <= 5) {
        std::string g, w;
        for (int64_t id : got.ids[i]) g += std::to_string(id) + " ";
        for (int64_t id : want) w += std::to_string(id) + " ";
        MESSAGE("prompt " << i << " " << json(prompts[i]).dump() << "\n  ditgen:       " << g << "\n  transformers: " << w
                          << "\n  masks: " << mask << " / " << want_mask);
      }
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("t5_tokenizer: every fixture prompt equals transformers' T5Tokenizer") {
  const auto prompts = fixture_prompts();
  const json expected = read_json_file(kFixtures + "/expected.json");
  REQUIRE(prompts.size() >= 300);
  REQUIRE(expected["cases"].size() == 8);  // 2 models x 2 legacy x 2 max_lengths
  for (const auto& c : expected["cases"]) {
    const std::string name = c["tokenizer"];
    const bool legacy = c["legacy"];
    const int64_t L = c["max_length"];
    CAPTURE(name);
    CAPTURE(legacy);
    CAPTURE(L);
    REQUIRE(c["ids"].size() == prompts.size());
    const T5Tokenizer tok = T5Tokenizer::open(kFixtures + "/" + name, legacy);
    CHECK(tok.legacy() == legacy);
    const T5Tokens got = tok.encode(prompts, L);
    REQUIRE(got.ids.size() == prompts.size());
    CHECK(mismatches(got, c, prompts) == 0);
  }
}

TEST_CASE("t5_tokenizer: legacy comes from tokenizer_config.json, absent meaning true") {
  const json expected = read_json_file(kFixtures + "/expected.json");
  // What transformers' from_pretrained gave for the fixture's folder.
  CHECK(T5Tokenizer::open(kFixtures + "/nfkc").legacy() == expected["default_legacy"].get<bool>());

  testing::TempDir dir("ditgen_test_t5_legacy");
  const std::string folder = copy_tokenizer(dir, "nfkc", "tokenizer");
  json cfg = read_json_file(folder + "/tokenizer_config.json");
  cfg.erase("legacy");
  dir.write("tokenizer/tokenizer_config.json", cfg.dump());
  CHECK(T5Tokenizer::open(folder).legacy());
  cfg["legacy"] = nullptr;
  dir.write("tokenizer/tokenizer_config.json", cfg.dump());
  CHECK(T5Tokenizer::open(folder).legacy());

  // "legacy": false read from the file gives the legacy=false fixture, and a
  // model directory (root with tokenizer/) opens the same folder.
  cfg["legacy"] = false;
  dir.write("tokenizer/tokenizer_config.json", cfg.dump());
  const T5Tokenizer tok = T5Tokenizer::open(dir.path.string());
  CHECK_FALSE(tok.legacy());
  const auto prompts = fixture_prompts();
  for (const auto& c : expected["cases"])
    if (c["tokenizer"] == "nfkc" && c["legacy"] == false) CHECK(mismatches(tok.encode(prompts, c["max_length"]), c, prompts) == 0);
}

TEST_CASE("t5_tokenizer: extra ids, EOS, padding, truncation, token counts") {
  const T5Tokenizer tok = T5Tokenizer::open(kFixtures + "/nfkc");
  const int64_t V = tok.vocab_size();  // pieces + 100 extra ids
  CHECK(tok.eos_id() == 1);
  CHECK(tok.pad_id() == 0);
  CHECK(tok.tokenize("<extra_id_3>") == std::vector<int64_t>{V - 1 - 3});
  CHECK(tok.tokenize("<extra_id_0>") == std::vector<int64_t>{V - 1});
  CHECK(tok.tokenize("<extra_id_99>") == std::vector<int64_t>{V - 100});
  CHECK(tok.tokenize("").empty());

  std::string long_prompt;
  for (int i = 0; i < 50; ++i) long_prompt += "a cat ";
  const T5Tokens t = tok.encode({"", "a cat", long_prompt}, 6);
  CHECK(t.ids[0] == std::vector<int64_t>{1, 0, 0, 0, 0, 0});
  CHECK(t.mask[0] == std::vector<int64_t>{1, 0, 0, 0, 0, 0});
  CHECK(t.num_tokens[0] == 1);
  const auto cat = tok.tokenize("a cat");
  CHECK(t.num_tokens[1] == static_cast<int64_t>(cat.size()) + 1);
  CHECK(t.ids[1][cat.size()] == 1);
  CHECK(t.num_tokens[2] == 6);  // truncated to 5 pieces + </s>
  CHECK(t.ids[2].back() == 1);
  CHECK(t.mask[2] == std::vector<int64_t>(6, 1));
  // max_length 1: only </s>.
  CHECK(tok.encode({"a long prompt"}, 1).ids[0] == std::vector<int64_t>{1});
}

TEST_CASE("t5_tokenizer: bad tokenizer folders are ModelErrors naming spiece.model") {
  testing::TempDir dir("ditgen_test_t5_bad");
  // Only tokenizer.json (a fast tokenizer's file): named, and said unsupported.
  dir.write("only_json/tokenizer/tokenizer.json", "{}");
  const std::string only_json = model_error_of([&] { T5Tokenizer::open(dir.file("only_json")); });
  CHECK(contains(only_json, dir.file("only_json/tokenizer/spiece.model") + ": not found"));
  CHECK(contains(only_json, "tokenizer.json"));

  fs::create_directories(dir.path / "missing");
  CHECK(contains(model_error_of([&] { T5Tokenizer::open(dir.file("missing")); }),
                 dir.file("missing/spiece.model") + ": not found"));

  dir.write("empty/spiece.model", "");
  CHECK(contains(model_error_of([&] { T5Tokenizer::open(dir.file("empty")); }), dir.file("empty/spiece.model") + ": empty"));

  dir.write("corrupt/spiece.model", "this is not a protobuf \xff\xfe\x01\x02 at all");
  for (bool legacy : {true, false}) {
    CAPTURE(legacy);
    CHECK(contains(model_error_of([&] { T5Tokenizer::open(dir.file("corrupt"), legacy); }),
                   dir.file("corrupt/spiece.model") + ": not a SentencePiece model"));
  }
  // A real model cut short.
  const std::string truncated = copy_tokenizer(dir, "bytefb", "truncated");
  fs::resize_file(truncated + "/spiece.model", fs::file_size(truncated + "/spiece.model") / 2);
  CHECK(contains(model_error_of([&] { T5Tokenizer::open(truncated); }), truncated + "/spiece.model: not a SentencePiece model"));

  // A broken tokenizer_config.json is named too.
  const std::string bad_cfg = copy_tokenizer(dir, "bytefb", "bad_cfg");
  dir.write("bad_cfg/tokenizer_config.json", "{\"legacy\": ");
  CHECK(contains(model_error_of([&] { T5Tokenizer::open(bad_cfg); }), bad_cfg + "/tokenizer_config.json"));
}

TEST_CASE("t5_tokenizer: bad requests are ConfigErrors") {
  const T5Tokenizer tok = T5Tokenizer::open(kFixtures + "/bytefb");
  CHECK(contains(config_error_of([&] { tok.encode({"a"}, 0); }), "max_sequence_length"));
  CHECK(contains(config_error_of([&] { tok.encode({"a"}, -3); }), "max_sequence_length"));
  for (const std::string& bad : {std::string("a\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
                                std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    const std::string msg = config_error_of([&] { tok.encode({"fine", bad}, 16); });
    CHECK(contains(msg, "prompt 1: invalid UTF-8"));
  }
}
