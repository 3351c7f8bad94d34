// peft's rank / alpha patterns and LoraConfig fields. The match table's
// expectations are Python's: re.match(rf"(.*\.)?({pattern})$", module), as
// peft's get_pattern_key calls it (run once with Python 3.11 to fill it in).
#include <doctest/doctest.h>

#include <string>

#include "error_helpers.h"
#include "io/lora_adapter_config.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::contains;
using ditgen::testing::model_error_of;

TEST_CASE("lora adapter config: peft's pattern match, as Python's re.match gives it") {
  struct Case {
    const char* pattern;
    const char* module;
    bool match;
  };
  const Case cases[] = {
      {"to_q", "blocks.0.attn1.to_q", true},
      {"attn1.to_q", "blocks.0.attn1.to_q", true},
      {"1.to_q", "blocks.0.attn1.to_q", false},
      {"blocks.0.attn1.to_q", "blocks.0.attn1.to_q", true},
      {"^blocks.0.attn1.to_q", "blocks.0.attn1.to_q", true},
      {"^attn1.to_q", "blocks.0.attn1.to_q", false},
      {"to_", "blocks.0.attn1.to_q", false},
      {"blocks.0", "blocks.0.attn1.to_q", false},
      {"blocks.1.attn1.to_q", "blocks.11.attn1.to_q", false},
      {"blocks.1.attn1.to_q", "blocks.1.attn1.to_q", true},
      {"locks.0.attn1.to_q", "blocks.0.attn1.to_q", false},
      {"ffn.net.2", "blocks.0.ffn.net.2", true},
      {"ffn.net.2", "blocks.0.ffn.net.20", false},
      {"net.2", "blocks.0.ffnXnet.2", false},
      {"blocks.0.attn1.to_q", "blocksX0.attn1.to_q", true},  // '.' is any character
      {"proj_out", "proj_out", true},
      {"proj_out", "norm_out.proj_out", true},
      {"out", "proj_out", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pattern);
    CAPTURE(c.module);
    CHECK(peft_pattern_matches(c.pattern, c.module) == c.match);
  }
}

TEST_CASE("lora adapter config: the first matching pattern in the file's order, else r / lora_alpha") {
  const LoraAdapterConfig c = parse_lora_adapter_config(
      nlohmann::json::parse(R"({"r": 4, "lora_alpha": 8, "rank_pattern": {"attn1.to_q": 2, "to_q": 3},
                                "alpha_pattern": {"to_k": 1.5}, "target_modules": ["x"], "use_rslora": null})"),
      "cfg");
  CHECK(c.rank_for("blocks.0.attn1.to_q") == 2);
  CHECK(c.rank_for("blocks.0.attn2.to_q") == 3);
  CHECK(c.rank_for("blocks.0.attn2.to_v") == 4);
  CHECK(c.alpha_for("blocks.0.attn2.to_k") == 1.5);
  CHECK(c.alpha_for("blocks.0.attn2.to_v") == 8);
  CHECK(c.scaling(8, 4) == 2);
  CHECK_FALSE(c.use_rslora);
}

TEST_CASE("lora adapter config: metadata split by prefix, and its errors") {
  const auto configs = parse_lora_adapter_metadata(
      R"({"transformer.r": 2, "transformer_2.r": 3, "transformer_2.lora_alpha": 6, "r": 5})", "m");
  REQUIRE(configs.size() == 3);
  CHECK(configs.at("transformer").r == 2);
  CHECK(configs.at("transformer").lora_alpha == 8);
  CHECK(configs.at("transformer_2").lora_alpha == 6);
  CHECK(configs.at("").r == 5);
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata("[1]", "m"); }), "m: expected an object, got array"));
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata(R"({"transformer.rank_pattern": {"x": 2.5}})", "m"); }),
                 "m: transformer.rank_pattern.x: expected an integer, got number"));
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata(R"({"alpha_pattern": []})", "m"); }),
                 "m: alpha_pattern: expected an object, got array"));
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata(R"({"use_rslora": 1})", "m"); }),
                 "m: use_rslora: expected true or false"));
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata(R"({"r": 1e300})", "m"); }), "m: r: expected an integer"));
  CHECK(contains(model_error_of([] { parse_lora_adapter_metadata(R"({"r": 18446744073709551615})", "m"); }),
                 "is not a rank"));
  for (const char* bad : {R"({"rank_pattern": {"a|b": 2}})", R"({"alpha_pattern": {"to_.*": 2}})",
                          R"({"rank_pattern": {"x$": 2}})", R"({"rank_pattern": {"": 2}})", R"({"rank_pattern": {"^": 2}})"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_lora_adapter_metadata(bad, "m"),
                         doctest::Contains("a regular expression this reader does not evaluate"), ConfigError);
  }
}
