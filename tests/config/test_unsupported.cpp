// The keys the design defines that this version does not build yet
// (config/schema.h: not_built_yet) are "not supported yet" (exit 2), never
// "unknown" and never ignored; what is built passes the config's checks,
// and what the model, the device or the layout decides is tested where it
// is decided (registry, device_choice, parallel/test_layout,
// pipeline/test_run_checks).
#include "config_test_support.h"

namespace ditgen::test {

TEST_CASE("a class-conditional PNG config on one process passes") {
  const std::string path = write_config(with(minimal_config(), "pab", json::object()));
  CHECK_NOTHROW(load_config(path, {"model.dtype=float32", "output.grid=true"}));
}

TEST_CASE("MP4 output passes, with its fps and crf") {
  const std::string path = write_config(with(with(minimal_config(), "output.format", "mp4"), "output.crf", 23));
  const RunConfig c = load_config(path, {"output.fps=12"});
  CHECK(c.output.format == OutputFormat::kMp4);
  CHECK(c.output.fps == 12);
  CHECK(c.output.crf == 23);
}

TEST_CASE("prompts, prompt files and frames pass (the model decides)") {
  const json prompts = with(with(without(minimal_config(), "generate.class_labels"), "generate.prompts", {"a cat"}),
                            "generate.negative_prompt", "blurry");
  CHECK_NOTHROW(load_config(write_config(prompts), {}));
  const std::string file = write_config(with(without(minimal_config(), "generate.class_labels"), "generate.prompt_file", "p.txt"));
  CHECK_NOTHROW(load_config(file, {}));
  // frames: the model decides (a video model takes it, an image model rejects it: tests/pipeline).
  CHECK_NOTHROW(load_config(write_config(with(minimal_config(), "generate.frames", 16)), {}));
}

TEST_CASE("component files pass, each read beside the config file: the model decides whether it fits") {
  std::filesystem::create_directories(temp_dir() / "files");
  json c = minimal_config();
  for (const auto& [key, file] : {std::pair{"model.transformer", "t.gguf"}, {"model.transformer_2", "t2.gguf"},
                                  {"model.text_encoder", "te.gguf"}, {"model.vae", "vae.safetensors"}})
    c = with(c, key, file);
  const RunConfig r = load_config(write_config(c, "files/run.json"), {});
  CHECK(r.model.text_encoder == (temp_dir() / "files/te.gguf").string());
  CHECK(r.model.vae == (temp_dir() / "files/vae.safetensors").string());
  CHECK(r.model.transformer_2 == (temp_dir() / "files/t2.gguf").string());
  // --set names a place relative to the current folder, and null takes the part from model.path.
  const RunConfig set = load_config(write_config(c, "files/run.json"), {"model.vae=v.gguf", "model.text_encoder=null"});
  CHECK(set.model.vae == "v.gguf");
  CHECK(set.model.text_encoder.empty());
}

TEST_CASE("parallel layouts pass: they are checked against the model and world size at run time") {
  auto c = with(with(with(minimal_config(), "parallel.sp", 2), "parallel.tp", 2), "parallel.cp", 2);
  CHECK_NOTHROW(load_config(write_config(c), {}));
  // cp = 2 without guidance too: that rule is the layout's
  // (parallel::layout_problems, tests/parallel/test_layout.cpp).
  CHECK_NOTHROW(load_config(write_config(with(c, "generate.guidance_scale", 1.0)), {}));
}

TEST_CASE("PAB schedules pass, with PipeFusion too: they are checked against the model and layout at run time") {
  json kind = {{"range", 2}, {"threshold", {100, 800}}};
  json c = with(minimal_config(), "pab.spatial", kind);
  kind["blocks"] = {0};
  c = with(c, "pab.mlp", kind);
  CHECK_NOTHROW(load_config(write_config(c), {}));
  CHECK_NOTHROW(load_config(write_config(c), {"parallel.pp=2"}));  // pipeline/run_checks.h refuses the pair
}

TEST_CASE("half-precision dtypes pass the config checks: they depend on the device (test_device_choice)") {
  for (const char* dtype : {"bfloat16", "float16"})
    CHECK_NOTHROW(load_config(write_config(with(minimal_config(), "model.dtype", dtype)), {}));
}

TEST_CASE("the first_block and teacache caches pass, with PipeFusion too") {
  const json fbc = with(minimal_config(), "cache", json{{"kind", "first_block"}, {"threshold", 0.05}});
  const std::string path = write_config(fbc);
  CHECK_NOTHROW(load_config(path, {}));
  CHECK_NOTHROW(load_config(path, {"cache.kind=teacache"}));
  CHECK_NOTHROW(load_config(path, {"parallel.pp=2"}));
}

TEST_CASE("image inputs pass, each read beside the config file: the model decides whether it takes them") {
  std::filesystem::create_directories(temp_dir() / "i2v");
  const json c = with(with(minimal_config(), "generate.image", "first.png"), "generate.last_image", "../last.jpg");
  const RunConfig r = load_config(write_config(c, "i2v/run.json"), {});
  CHECK(r.generate.image == (temp_dir() / "i2v/first.png").string());
  CHECK(r.generate.last_image == (temp_dir() / "last.jpg").lexically_normal().string());
  // --set (and --image) name places relative to the current folder; "" takes none.
  const RunConfig set = load_config(write_config(c, "i2v/run.json"), {"generate.image=x.png", "generate.last_image=\"\""});
  CHECK(set.generate.image == "x.png");
  CHECK(set.generate.last_image.empty());
  // They round-trip through the effective config.
  CHECK(to_json(r)["generate"]["image"] == r.generate.image);
  CHECK(to_json(r)["generate"]["last_image"] == r.generate.last_image);
  CHECK_FALSE(to_json(set)["generate"].contains("last_image"));
  // Of the wrong type: the field is named.
  CHECK(contains(load_error(with(minimal_config(), "generate.image", 3)), "generate.image"));
}

TEST_CASE("a key that is neither built nor planned is unknown, with a suggestion") {
  CHECK(contains(load_error(with(minimal_config(), "model.transformers", "t.gguf")), "unknown key"));
  CHECK(contains(load_error(with(minimal_config(), "generate.imag", "x.png")), "did you mean generate.image"));
}

}  // namespace ditgen::test
