// The lora section, lora_strict and lora_apply (docs/lora.md): parsed with
// their defaults, a file's relative LoRA paths beside it, each item's keys
// and types checked naming lora[i]; to_json writes the list back so it
// round-trips; lora_apply is "merge", "runtime" or left to the weights (unset). --lora:
// test_cli_options.cpp.
#include "config_test_support.h"

namespace ditgen::test {

TEST_CASE("lora: defaults, a list of path / scale / target, paths beside the config file") {
  const RunConfig none = load_config(write_config(minimal_config()), {});
  CHECK(none.lora.empty());
  CHECK(none.lora_strict);
  CHECK_FALSE(none.lora_apply.has_value());  // as each weight is stored (pipeline/lora_setup.h)
  CHECK_FALSE(to_json(none).contains("lora"));  // configs without one write what they did

  const json list = json::array({{{"path", "loras/a.safetensors"}},
                                 {{"path", "/abs/b.safetensors"}, {"scale", -0.5}, {"target", "both"}}});
  json doc = with(minimal_config(), "lora", list);
  doc["lora_strict"] = false;
  doc["lora_apply"] = "merge";
  const std::string path = write_config(doc);
  const RunConfig c = load_config(path, {});
  REQUIRE(c.lora.size() == 2);
  CHECK(c.lora[0].path == (temp_dir() / "loras/a.safetensors").lexically_normal().string());
  CHECK(c.lora[0].scale == 1.0);
  CHECK(c.lora[0].target == LoraTargetChoice::kTransformer);  // diffusers' load_lora_weights
  CHECK(c.lora[1].path == "/abs/b.safetensors");
  CHECK(c.lora[1].scale == -0.5);
  CHECK(c.lora[1].target == LoraTargetChoice::kBoth);
  CHECK_FALSE(c.lora_strict);
  // to_json round-trips it
  const RunConfig again = load_config(write_config(to_json(c), "again.json"), {});
  CHECK(again.lora == c.lora);
  CHECK(again.lora_strict == c.lora_strict);
  CHECK(again.lora_apply == LoraApply::kMerge);
  doc["lora_apply"] = "runtime";
  const RunConfig runtime = load_config(write_config(doc, "runtime.json"), {});
  CHECK(runtime.lora_apply == LoraApply::kRuntime);
  CHECK(load_config(write_config(to_json(runtime), "again2.json"), {}).lora_apply == LoraApply::kRuntime);
}

TEST_CASE("lora: each item's keys and values checked, naming lora[i], and lora_apply's names") {
  auto error_for = [](const json& list) { return load_error(with(minimal_config(), "lora", list)); };
  CHECK(contains(error_for(json{{"path", "a"}}), "lora: expected a list"));
  CHECK(contains(error_for(json::array({"a.safetensors"})), "lora[0]: expected an object"));
  CHECK(contains(error_for(json::array({{{"scale", 1}}})), "lora[0].path: required"));
  CHECK(contains(error_for(json::array({{{"path", "a"}}, {{"path", "b"}, {"scael", 1}}})),
                 "lora[1].scael: unknown key"));
  CHECK(contains(error_for(json::array({{{"path", "a"}, {"scale", "high"}}})), "lora[0].scale: expected a number"));
  CHECK(contains(error_for(json::array({{{"path", "a"}, {"target", "transformer_3"}}})), "lora[0].target"));
  json strict = minimal_config();
  strict["lora_strict"] = "yes";
  CHECK(contains(load_error(strict), "lora_strict"));
  json apply = minimal_config();
  apply["lora_apply"] = "later";
  CHECK(contains(load_error(apply), "lora_apply"));
}

}  // namespace ditgen::test
