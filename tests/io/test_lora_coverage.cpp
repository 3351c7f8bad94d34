// A LoRA's targets against a model's tensors: applied, unmatched (no such
// tensor, another shape, unknown keys), the other expert's; the report line;
// lora_strict's error (exit 2, the count and the first keys) and warning.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "io/lora_coverage.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::contains;

namespace {

Tensor ones(const Shape& shape) { return Tensor::full(shape, 0.5f); }

// A model of these tensors.
std::function<std::optional<Shape>(const std::string&)> model(std::map<std::string, Shape> tensors) {
  return [tensors](const std::string& name) -> std::optional<Shape> {
    auto it = tensors.find(name);
    if (it == tensors.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("lora coverage: applied, unmatched and the report line") {
  ditgen::testing::TempDir dir("ditgen_test_lora_coverage");
  const std::string path = dir.file("style.safetensors");
  write_safetensors(path, {{"lora_unet_blocks_0_self_attn_q.lora_down.weight", ones({2, 8})},
                           {"lora_unet_blocks_0_self_attn_q.lora_up.weight", ones({8, 2})},
                           {"lora_unet_blocks_0_self_attn_q.alpha", Tensor::full({}, 1)},
                           {"lora_unet_blocks_0_cross_attn_k.lora_down.weight", ones({2, 8})},
                           {"lora_unet_blocks_0_cross_attn_k.lora_up.weight", ones({6, 2})},
                           {"lora_unet_blocks_7_ffn_0.lora_down.weight", ones({2, 8})},
                           {"lora_unet_blocks_7_ffn_0.lora_up.weight", ones({8, 2})},
                           {"lora_unet_blocks_0_ffn_0.diff_b", ones({16})},
                           {"lora_te_x.lora_down.weight", ones({2, 4})},
                           {"lora_unet_blocks_0_something.lora_up.weight", ones({8, 2})}});
  const LoraFile f = read_lora_file(path);
  const auto wan = model({{"blocks.0.attn1.to_q.weight", {8, 8}},
                          {"blocks.0.attn2.to_k.weight", {8, 8}},
                          {"blocks.0.ffn.net.0.proj.bias", {16}}});
  const LoraMatch m = match_lora(f, LoraExpert::kAny, wan);
  REQUIRE(m.applied.size() == 2);
  CHECK(m.applied[0]->tensor == "blocks.0.attn1.to_q.weight");
  CHECK(m.applied[1]->tensor == "blocks.0.ffn.net.0.proj.bias");
  std::map<std::string, std::string> why;
  for (const LoraKeyNote& u : m.unmatched) why[u.key] = u.reason;
  CHECK(why.size() == 5);
  CHECK(why.at("lora_unet_blocks_0_cross_attn_k.lora_up.weight") ==
        "blocks.0.attn2.to_k.weight is [8, 8], the LoRA changes [6, 8]");
  CHECK(why.at("lora_unet_blocks_7_ffn_0.lora_down.weight") == "the model has no tensor blocks.7.ffn.net.0.proj.weight");
  CHECK(contains(why.at("lora_unet_blocks_0_something.lora_up.weight"), "kohya name"));
  CHECK(lora_report_line(f, m) ==
        "lora style.safetensors (kohya): 4 keys applied to 2 tensors (1 bias, 1 low-rank), 1 skipped "
        "(1 text encoder), 5 unmatched");

  // lora_strict: the count and the first five keys, exit 2
  try {
    check_lora_coverage(f, m, true);
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(contains(msg, path + ": 5 LoRA keys match no tensor of the model: "));
    CHECK(contains(msg, "lora_unet_blocks_0_cross_attn_k.lora_down.weight: blocks.0.attn2.to_k.weight is [8, 8]"));
    CHECK(contains(msg, "(lora_strict: false applies the rest)"));
    CHECK(e.exit_code() == 2);
  }
  const std::string warning = check_lora_coverage(f, m, false);
  CHECK(contains(warning, "5 LoRA keys match no tensor of the model"));
  CHECK_FALSE(contains(warning, "lora_strict"));

  // all matched: no error, no warning
  const LoraMatch none = match_lora(f, LoraExpert::kAny, model({}));
  LoraMatch all = none;
  all.unmatched.clear();
  CHECK(check_lora_coverage(f, all, true).empty());
}

TEST_CASE("lora coverage: a first-keys list stops at five") {
  ditgen::testing::TempDir dir("ditgen_test_lora_coverage");
  std::vector<std::pair<std::string, Tensor>> keys;
  for (int i = 0; i < 7; ++i) {
    std::string name = std::to_string(i);  // (GCC 12 warns falsely on "x" + std::to_string(i))
    keys.push_back({"x" + name + ".diff", ones({2})});
  }
  write_safetensors(dir.file("many.safetensors"), keys);
  const LoraFile f = read_lora_file(dir.file("many.safetensors"));
  const std::string msg = check_lora_coverage(f, match_lora(f, LoraExpert::kAny, model({})), false);
  CHECK(contains(msg, "7 LoRA keys match no tensor of the model: x0.diff: the model has no tensor x0.weight; "));
  CHECK(contains(msg, "x4.diff: the model has no tensor x4.weight; ..."));
  CHECK_FALSE(contains(msg, "x5.diff"));
}
