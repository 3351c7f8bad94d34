// --set key.path=value overrides: value parsing (JSON or plain string),
// section creation, order, schema checks, and messages that point at the
// --set that supplied a bad value.
#include "config_test_support.h"

namespace ditgen::test {

namespace {

RunConfig load_with(const std::vector<std::string>& sets, const json& document = minimal_config()) {
  return load_config(write_config(document), sets);
}

}  // namespace

TEST_CASE("--set parses numbers, booleans, strings and lists") {
  const RunConfig c = load_with({"generate.steps=20", "generate.guidance_scale=1.5", "output.grid=true",
                                 "output.path=out/other dir/x.png", "generate.scheduler=ddim",
                                 "model.dtype=\"float32\"", "generate.class_labels=[1, \"tabby\", 3]",
                                 "generate.seed=18446744073709551615"});
  CHECK(c.generate.steps == 20);
  CHECK(c.generate.guidance_scale == 1.5);
  CHECK(c.output.grid);
  CHECK(c.output.path == "out/other dir/x.png");
  CHECK(c.generate.scheduler == sched::Sampler::kDdim);
  CHECK(c.model.dtype == DTypeChoice::kFloat32);
  REQUIRE(c.generate.class_labels.size() == 3);
  CHECK(c.generate.class_labels[1] == ClassLabel(std::string("tabby")));
  CHECK(c.generate.seed == 18446744073709551615ull);
}

TEST_CASE("--set value may contain '=' and may be empty") {
  const RunConfig c = load_with({"output.path=out/a=b.png", "generate.scheduler="});
  CHECK(c.output.path == "out/a=b.png");
  CHECK(c.generate.scheduler == sched::Sampler::kModelDefault);
}

TEST_CASE("--set creates absent sections") {
  json document = without(minimal_config(), "output");
  const RunConfig c = load_with({"output.path=x.png", "parallel.sp=2", "pab.mlp.range=3",
                                 "pab.mlp.threshold=[100,800]", "pab.mlp.blocks=[0,2]"},
                                document);
  CHECK(c.output.path == "x.png");
  CHECK(c.parallel.sp == 2);
  REQUIRE(c.pab.mlp);
  CHECK(c.pab.mlp->range == 3);
  CHECK(c.pab.mlp->blocks == std::vector<int>{0, 2});
}

TEST_CASE("--set replaces a whole section given as JSON") {
  const RunConfig c = load_with({R"(pab.spatial={"range": 2, "threshold": [100, 800]})"});
  REQUIRE(c.pab.spatial);
  CHECK(c.pab.spatial->range == 2);
}

TEST_CASE("later --set entries win") {
  CHECK(load_with({"generate.steps=5", "generate.steps=9"}).generate.steps == 9);
}

// Found by fuzz_run_config: "pab.mlp.range=3\xff..." became a string value
// with invalid UTF-8, and the type error's message (json::dump) threw
// nlohmann's type_error (exit 1) instead of a ConfigError.
TEST_CASE("--set with bytes that are not UTF-8 is a ConfigError naming the entry") {
  for (const std::string set : {"pab.mlp.range=3\xffpab", "output.path=out/\xff.png", "generate.st\xff" "eps=3"}) {
    const std::string message = load_error(write_config(minimal_config()), {set});
    INFO(message);
    CHECK(contains(message, "run.json"));
    CHECK(contains(message, "not valid UTF-8"));
  }
}

TEST_CASE("--set to a path outside the schema is rejected with a suggestion") {
  const std::string message = load_error(write_config(minimal_config()), {"generate.stpes=3"});
  INFO(message);
  CHECK(contains(message, "run.json: generate.stpes: unknown key (did you mean generate.steps?)"));
  CHECK(contains(message, "--set generate.stpes=3"));
  CHECK(contains(load_error(write_config(minimal_config()), {"generate.steps.x=3"}), "generate.steps.x: unknown key"));
  CHECK(contains(load_error(write_config(minimal_config()), {"pab.spatial.blocks=[1]"}),
                 "did you mean pab.mlp.blocks?"));
}

TEST_CASE("a malformed --set entry is rejected") {
  CHECK(contains(load_error(write_config(minimal_config()), {"generate.steps"}), "expected key.path=value"));
  CHECK(contains(load_error(write_config(minimal_config()), {"=3"}), "expected key.path=value"));
}

TEST_CASE("a bad value from --set is reported with the --set that gave it") {
  const std::string message = load_error(write_config(minimal_config()), {"generate.steps=fifty"});
  INFO(message);
  CHECK(contains(message, "run.json: generate.steps: expected a positive integer, got \"fifty\""));
  CHECK(contains(message, "(from --set generate.steps=fifty)"));
  const std::string in_list = load_error(write_config(minimal_config()), {"generate.class_labels=[1,2.5]"});
  CHECK(contains(in_list, "generate.class_labels[1]"));
  CHECK(contains(in_list, "(from --set generate.class_labels=[1,2.5])"));
}

TEST_CASE("a bad value from the file does not blame a --set") {
  const std::string message =
      load_error(with(minimal_config(), "generate.steps", 0), {"generate.batch_size=2"});
  CHECK_FALSE(contains(message, "--set"));
}

TEST_CASE("--set through a section that holds a non-object is rejected") {
  const std::string message =
      load_error(with(minimal_config(), "model", "models/dit"), {"model.path=models/other"});
  INFO(message);
  CHECK(contains(message, "run.json: model: expected an object"));
  CHECK(contains(message, "--set model.path=models/other"));
}

// null in a file is a wrong type; --set key=null removes the key, so its
// default applies (e.g. output.fps before writing png from an mp4 config).
TEST_CASE("--set key=null removes the key, null in the file is a wrong type") {
  const std::string path = write_config(with(minimal_config(), "generate.steps", 7));
  CHECK(load_config(path, {}).generate.steps == 7);
  CHECK(load_config(path, {"generate.steps=null"}).generate.steps == 50);
  CHECK(load_config(write_config(minimal_config()), {"generate.seed=null"}).generate.seed == 0);  // absent: nothing to do
  CHECK(contains(load_error(with(minimal_config(), "generate.steps", nullptr)), "got null"));
}

}  // namespace ditgen::test
