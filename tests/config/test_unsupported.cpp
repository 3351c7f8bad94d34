// reject_unsupported and the keys DESIGN.md defines that this version does
// not build yet (config/schema.h: not_built_yet): what the contract allows
// and is built passes; the rest is "not supported yet"; what the model or
// the device decides is tested where it is decided (registry, device_choice).
#include "config_test_support.h"

namespace ditgen::test {

TEST_CASE("a class-conditional PNG config on one process is supported") {
  const std::string path = write_config(with(minimal_config(), "pab", json::object()));
  CHECK_NOTHROW(reject_unsupported(load_config(path, {"model.dtype=float32", "output.grid=true"}), path));
}

TEST_CASE("MP4 output is supported, with its fps and crf") {
  const std::string path = write_config(with(with(minimal_config(), "output.format", "mp4"), "output.crf", 23));
  const RunConfig c = load_config(path, {"output.fps=12"});
  CHECK_NOTHROW(reject_unsupported(c, path));
  CHECK(c.output.format == OutputFormat::kMp4);
  CHECK(c.output.fps == 12);
  CHECK(c.output.crf == 23);
}

TEST_CASE("prompts, prompt files and frames pass (the model decides)") {
  const json prompts = with(with(without(minimal_config(), "generate.class_labels"), "generate.prompts", {"a cat"}),
                            "generate.negative_prompt", "blurry");
  const std::string path = write_config(prompts);
  CHECK_NOTHROW(reject_unsupported(load_config(path, {}), path));
  const std::string file = write_config(with(without(minimal_config(), "generate.class_labels"), "generate.prompt_file", "p.txt"));
  CHECK_NOTHROW(reject_unsupported(load_config(file, {}), file));
  // frames: the model decides (a video model takes it, an image model rejects it: tests/pipeline).
  const std::string frames = write_config(with(minimal_config(), "generate.frames", 16));
  CHECK_NOTHROW(reject_unsupported(load_config(frames, {}), frames));
}

TEST_CASE("parallel layouts pass: they are checked against the model and world size at run time") {
  auto c = with(with(with(minimal_config(), "parallel.sp", 2), "parallel.tp", 2), "parallel.cp", 2);
  const std::string path = write_config(c);
  CHECK_NOTHROW(reject_unsupported(load_config(path, {}), path));
}

TEST_CASE("PAB schedules pass: they are checked against the model at run time") {
  json kind = {{"range", 2}, {"threshold", {100, 800}}};
  json c = with(minimal_config(), "pab.spatial", kind);
  kind["blocks"] = {0};
  c = with(c, "pab.mlp", kind);
  const std::string path = write_config(c);
  CHECK_NOTHROW(reject_unsupported(load_config(path, {}), path));
}

TEST_CASE("PAB together with PipeFusion is not supported yet, naming the file and both settings") {
  json kind = {{"range", 2}, {"threshold", {100, 800}}};
  const std::string path = write_config(with(with(minimal_config(), "pab.spatial", kind), "parallel.pp", 2));
  const RunConfig c = load_config(path, {});
  CHECK(c.parallel.pp == 2);
  try {
    reject_unsupported(c, path);
    FAIL("accepted");
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    CHECK(m.find("not supported yet: PAB together with PipeFusion") != std::string::npos);
    CHECK(m.find(path + ": parallel.pp=2") != std::string::npos);
  }
  // Either alone passes.
  CHECK_NOTHROW(reject_unsupported(load_config(path, {"parallel.pp=1"}), path));
}

TEST_CASE("half-precision dtypes pass the config checks: they depend on the device (test_device_choice)") {
  for (const char* dtype : {"bfloat16", "float16"}) {
    const std::string path = write_config(with(minimal_config(), "model.dtype", dtype));
    CHECK_NOTHROW(reject_unsupported(load_config(path, {}), path));
  }
}

}  // namespace ditgen::test

// DESIGN.md's cache section: first_block and teacache are built (their
// checks are in test_validation), alone and with PipeFusion.
TEST_CASE("the first_block and teacache caches pass, with PipeFusion too") {
  using namespace ditgen;
  using namespace ditgen::test;
  const json fbc = with(minimal_config(), "cache", json{{"kind", "first_block"}, {"threshold", 0.05}});
  const std::string path = write_config(fbc);
  CHECK_NOTHROW(reject_unsupported(load_config(path, {}), path));
  CHECK_NOTHROW(reject_unsupported(load_config(path, {"cache.kind=teacache"}), path));
  CHECK_NOTHROW(reject_unsupported(load_config(path, {"parallel.pp=2"}), path));
}
