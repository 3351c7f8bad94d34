// The batch settings of the config schema (docs/design.md §2): output.skip_existing
// (what --resume sets) and generate.prompt_file against generate.prompts.
#include "config_test_support.h"

namespace ditgen::test {

TEST_CASE("output.skip_existing: a boolean, off by default, written back only when on") {
  const std::string off = write_config(minimal_config());
  CHECK_FALSE(load_config(off, {}).output.skip_existing);
  CHECK_FALSE(to_json(load_config(off, {}))["output"].contains("skip_existing"));
  const RunConfig on = load_config(off, {"output.skip_existing=true"});
  CHECK(on.output.skip_existing);
  CHECK(to_json(on)["output"]["skip_existing"] == true);
  // to_json loads back to the same settings.
  const std::string again = write_config(to_json(on), "again.json");
  CHECK(load_config(again, {}).output == on.output);
  CHECK(contains(load_error(with(minimal_config(), "output.skip_existing", "yes")), "output.skip_existing"));
}

TEST_CASE("generate.prompt_file: alone it is the run's prompts, with generate.prompts an error") {
  const json text = without(minimal_config(), "generate.class_labels");
  const RunConfig c = load_config(write_config(with(text, "generate.prompt_file", "p.jsonl")), {});
  // A relative path in the file names a file beside it.
  const std::string beside = (temp_dir() / "p.jsonl").string();
  CHECK(c.generate.prompt_file == beside);
  CHECK(to_json(c)["generate"]["prompt_file"] == beside);
  CHECK(contains(load_error(with(with(text, "generate.prompt_file", "p.txt"), "generate.prompts", {"a"})),
                 "generate.prompt_file: give generate.prompts or generate.prompt_file, not both"));
  // --prompt-file's overrides replace a config's prompts.
  const std::string prompts = write_config(with(text, "generate.prompts", {"a"}), "prompts.json");
  const RunConfig file = load_config(prompts, {"generate.prompts=[]", "generate.prompt_file=\"q.txt\""});
  CHECK(file.generate.prompts.empty());
  CHECK(file.generate.prompt_file == "q.txt");
}

}  // namespace ditgen::test
