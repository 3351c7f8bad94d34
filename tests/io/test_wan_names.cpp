// The Wan name table against diffusers' own converter: every original
// transformer tensor name of tests/fixtures/lora/wan_names.json (the Wan
// release's text- and image-to-video model, two blocks) with the name
// diffusers 0.42.1's convert_wan_transformer_to_diffusers gives it, checked
// both ways, as module names (no suffix) and underscored (musubi-tuner's
// LoRA keys); and names that are not Wan's.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "io/model_dir.h"
#include "io/wan_names.h"

using namespace ditgen::io;

namespace {

nlohmann::json name_pairs() {
  return read_json_file(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/lora/wan_names.json")["original_to_diffusers"];
}

std::string strip_suffix(const std::string& name) {
  for (const char* suffix : {".weight", ".bias"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return name.substr(0, name.size() - s.size());
  }
  return name;
}

std::string underscored(std::string s) {
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

}  // namespace

TEST_CASE("wan names: every original tensor name maps as diffusers' converter maps it, both ways") {
  const nlohmann::json pairs = name_pairs();
  REQUIRE(pairs.size() > 60);
  std::set<std::string> diffusers_names;
  for (const auto& [original, diffusers] : pairs.items()) {
    CAPTURE(original);
    const std::string want = diffusers.get<std::string>();
    CHECK(wan_original_to_diffusers(original) == want);
    CHECK(wan_diffusers_to_original(want) == original);
    diffusers_names.insert(want);
    // a module's name alone (a LoRA key's stem), and underscored
    const std::string module = strip_suffix(original);
    CHECK(wan_original_to_diffusers(module) == strip_suffix(want));
    CHECK(wan_original_from_underscored(underscored(module)) == module);
    CHECK(wan_is_parameter(module) == (module == original));
  }
  CHECK(diffusers_names.size() == pairs.size());  // one-to-one
}

TEST_CASE("wan names: block numbers carry over, and what is not a Wan name is refused") {
  CHECK(wan_original_to_diffusers("blocks.39.cross_attn.o.bias") == "blocks.39.attn2.to_out.0.bias");
  CHECK(wan_original_to_diffusers("blocks.123.ffn.2") == "blocks.123.ffn.net.2");
  CHECK(wan_original_from_underscored("blocks_17_ffn_0") == "blocks.17.ffn.0");
  CHECK(wan_original_from_underscored("blocks_17_self_attn_norm_q") == "blocks.17.self_attn.norm_q");
  CHECK(wan_original_from_underscored("time_projection_1") == "time_projection.1");
  CHECK(wan_is_parameter("blocks.2.modulation"));
  CHECK(wan_is_parameter("scale_shift_table"));
  CHECK_FALSE(wan_is_parameter("blocks.2.self_attn.q"));
  for (const char* bad : {"blocks.0.self_attn.q.lora_A.weight", "blocks.01.self_attn.q", "blocks..self_attn.q",
                          "blocks.x.self_attn.q", "blocks.0", "blocks.0.", "blocks.0.modulation.weight",
                          "transformer_blocks.0.attn1.to_q", "head", "self_attn.q", "blocks.1234567890.ffn.0", ""}) {
    CAPTURE(bad);
    CHECK_FALSE(wan_original_to_diffusers(bad));
    CHECK_FALSE(wan_original_from_underscored(underscored(bad)));
  }
  // diffusers' names are not original ones (norm2 / norm3 excepted: both
  // sides name them, the other way round)
  CHECK_FALSE(wan_original_to_diffusers("blocks.0.attn1.to_q.weight"));
  CHECK(wan_original_to_diffusers("blocks.0.norm2.weight") == "blocks.0.norm3.weight");
  CHECK(wan_diffusers_to_original("blocks.0.norm2.weight") == "blocks.0.norm3.weight");
  CHECK_FALSE(wan_diffusers_to_original("blocks.0.self_attn.q"));
  CHECK_FALSE(wan_original_from_underscored("blocks_0_attn1_to_q"));
}
