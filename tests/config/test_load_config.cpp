// Loading whole configs: defaults, a full config's values, the round trip
// through to_json, and the file-level failures (missing, truncated, not an
// object, duplicate keys).
#include "config_test_support.h"

namespace ditgen::test {

namespace {

json full_config() {
  return json::parse(R"({
    "model": { "path": "models/DiT-XL-2-256", "dtype": "float32" },
    "generate": {
      "class_labels": [207, "umbrella", 0],
      "seed": 18446744073709551615,
      "steps": 25,
      "guidance_scale": 1.5,
      "scheduler": "dpmpp_2m",
      "batch_size": 2,
      "height": 256,
      "width": 256
    },
    "parallel": { "sp": 2, "cp": 2, "tp": 1, "sp_mode": "ring" },
    "pab": {
      "spatial":  { "range": 2, "threshold": [100, 800] },
      "temporal": { "range": 3, "threshold": [100.5, 800] },
      "cross":    { "range": 5, "threshold": [0, 900] },
      "mlp":      { "range": 2, "threshold": [100, 800], "blocks": [0, 1, 2, 3, 4] }
    },
    "output": { "path": "out/dit.mp4", "format": "mp4", "fps": 12.5, "crf": 23, "grid": true }
  })");
}

}  // namespace

TEST_CASE("a minimal config takes the documented defaults") {
  const RunConfig c = load_config(write_config(minimal_config()), {});
  CHECK(c.model.path == (temp_dir() / "models/DiT-XL-2-256").string());  // beside the file
  CHECK(c.model.dtype == DTypeChoice::kAuto);
  REQUIRE(c.generate.class_labels.size() == 2);
  CHECK(c.generate.class_labels[0] == ClassLabel(207));
  CHECK(c.generate.class_labels[1] == ClassLabel(std::string("umbrella")));
  CHECK(c.generate.num_outputs() == 2);
  CHECK(c.generate.seed == 0);
  CHECK(c.generate.steps == 50);
  CHECK(c.generate.guidance_scale == 4.0);
  CHECK(c.generate.scheduler == sched::Sampler::kModelDefault);
  CHECK(c.generate.batch_size == 4);
  CHECK(c.generate.frames == 0);
  CHECK(c.generate.height == 0);
  CHECK(c.generate.width == 0);
  CHECK(c.parallel == ParallelConfig{});
  CHECK(c.parallel.world_size() == 1);
  CHECK_FALSE(c.pab.enabled());
  CHECK(c.output.format == OutputFormat::kPng);
  CHECK(c.output.fps == 8);
  CHECK(c.output.crf == 18);
  CHECK_FALSE(c.output.grid);
  CHECK(contains(c.source_file, "run.json"));
  CHECK(c.source_json == minimal_config());
}

TEST_CASE("PipeFusion and sp_weights settings load, and to_json writes them back only when set") {
  json c = with(with(with(minimal_config(), "parallel.pp", 2), "parallel.patches", 6), "parallel.warmup_steps", 3);
  c = with(c, "parallel.sp_weights", {2, 1});
  const RunConfig r = load_config(write_config(c), {});
  CHECK(r.parallel.pp == 2);
  CHECK(r.parallel.patches == 6);
  CHECK(r.parallel.warmup_steps == 3);
  CHECK(r.parallel.sp_weights == std::vector<int64_t>{2, 1});
  CHECK(r.parallel.world_size() == 2);
  const json back = to_json(r);
  CHECK(back["parallel"]["pp"] == 2);
  CHECK(back["parallel"]["sp_weights"] == json({2, 1}));
  const RunConfig again = load_config(write_config(back), {});
  CHECK(again.parallel == r.parallel);
  const json plain = to_json(load_config(write_config(minimal_config()), {"parallel.sp_weights=[1,3]"}));
  CHECK_FALSE(plain["parallel"].contains("pp"));
  CHECK(plain["parallel"]["sp_weights"] == json({1, 3}));
}

TEST_CASE("a full config loads every field") {
  const RunConfig c = load_config(write_config(full_config()), {});
  CHECK(c.model.dtype == DTypeChoice::kFloat32);
  CHECK(c.generate.class_labels.size() == 3);
  CHECK(c.generate.seed == 18446744073709551615ull);
  CHECK(c.generate.steps == 25);
  CHECK(c.generate.guidance_scale == 1.5);
  CHECK(c.generate.scheduler == sched::Sampler::kDpmpp2m);
  CHECK(c.generate.batch_size == 2);
  CHECK(c.generate.height == 256);
  CHECK(c.parallel.sp == 2);
  CHECK(c.parallel.cp == 2);
  CHECK(c.parallel.world_size() == 4);
  CHECK(c.parallel.sp_mode == parallel::SpMode::kRing);
  REQUIRE(c.pab.spatial);
  CHECK(c.pab.spatial->range == 2);
  CHECK(c.pab.spatial->threshold == std::array<double, 2>{100, 800});
  REQUIRE(c.pab.temporal);
  CHECK(c.pab.temporal->threshold[0] == 100.5);
  REQUIRE(c.pab.mlp);
  CHECK(c.pab.mlp->blocks == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(c.output.fps == 12.5);
  CHECK(c.output.crf == 23);
  CHECK(c.output.grid);
}

TEST_CASE("a full config round-trips through to_json") {
  const RunConfig first = load_config(write_config(full_config()), {});
  const RunConfig second = load_config(write_config(to_json(first), "roundtrip.json"), {});
  CHECK(second.model == first.model);
  CHECK(second.generate == first.generate);
  CHECK(second.parallel == first.parallel);
  CHECK(second.pab == first.pab);
  CHECK(second.output == first.output);
}

TEST_CASE("a text-to-video config round-trips through to_json") {
  json video = without(full_config(), "generate.class_labels");
  video = with(video, "generate.prompts", {"a cat", " a dog "});
  video = with(video, "generate.negative_prompt", "blurry");
  video = with(video, "generate.frames", 16);
  video = with(video, "output.format", "mp4");
  const RunConfig first = load_config(write_config(video), {});
  CHECK(first.generate.prompts == std::vector<std::string>{"a cat", " a dog "});
  CHECK(first.generate.num_outputs() == 2);
  const RunConfig second = load_config(write_config(to_json(first), "roundtrip.json"), {});
  CHECK(second.generate == first.generate);
  CHECK(second.output == first.output);
}

TEST_CASE("to_json holds the effective config: overrides and defaults applied") {
  const RunConfig c = load_config(write_config(minimal_config()), {"generate.steps=7"});
  const json effective = to_json(c);
  CHECK(effective["generate"]["steps"] == 7);
  CHECK(effective["generate"]["batch_size"] == 4);
  CHECK(effective["parallel"]["sp_mode"] == "auto");
  CHECK(effective["pab"] == json::object());
  CHECK_FALSE(effective["generate"].contains("scheduler"));  // "" = model default
  CHECK(c.overrides == std::vector<std::string>{"generate.steps=7"});
  CHECK(c.source_json == minimal_config());  // the file as read
}

TEST_CASE("a missing config file names the file") {
  const std::string missing = (temp_dir() / "no_such_run.json").string();
  const std::string message = load_error(missing);
  CHECK(contains(message, "no_such_run.json"));
  CHECK(contains(message, "cannot read"));
}

TEST_CASE("a directory as config file is an error") {
  CHECK(contains(load_error(temp_dir().string()), "directory"));
}

TEST_CASE("a truncated JSON file names the file and the parse position") {
  const std::string text = minimal_config().dump(2);
  const std::string message = load_error(write_file(text.substr(0, text.size() / 2)));
  INFO(message);
  CHECK(contains(message, "run.json"));
  CHECK(contains(message, "invalid JSON"));
  CHECK(contains(message, "line "));
  CHECK(contains(message, "column "));
  CHECK_FALSE(contains(message, "json.exception"));
}

// Found by fuzz_run_config: nlohmann reports a number beyond double as
// out_of_range (not parse_error), which escaped as exit 1.
TEST_CASE("a number too large for a double is invalid JSON (exit 2), naming the file") {
  const std::string message =
      load_error(write_file(R"({"model": {"path": "m"}, "generate": {"steps": 1e400}})"));
  INFO(message);
  CHECK(contains(message, "run.json"));
  CHECK(contains(message, "invalid JSON"));
  CHECK(contains(message, "1e400"));
}

TEST_CASE("an empty file is invalid JSON") {
  CHECK(contains(load_error(write_file("")), "invalid JSON"));
}

TEST_CASE("the document must be an object") {
  const std::string message = load_error(write_file("[1, 2]"));
  CHECK(contains(message, "run.json"));
  CHECK(contains(message, "top level"));
}

TEST_CASE("a duplicate key is an error naming its path") {
  const std::string message = load_error(write_file(R"({
    "model": {"path": "m"},
    "generate": {"class_labels": [1], "steps": 10, "steps": 20},
    "output": {"path": "o.png"}})"));
  INFO(message);
  CHECK(contains(message, "run.json: generate.steps: duplicate key"));
}

TEST_CASE("a duplicate key inside a list element names the element") {
  // Not in the schema, but the duplicate check runs first and must track
  // array positions.
  const std::string message = load_error(write_file(R"({"x": [1, {"a": 1, "a": 2}]})"));
  CHECK(contains(message, "x[1].a: duplicate key"));
}

TEST_CASE("the same key in different sections is not a duplicate") {
  json document = minimal_config();
  document["model"]["path"] = "m";
  CHECK_NOTHROW(load_config(write_config(document), {}));
}

}  // namespace ditgen::test

namespace ditgen::test {

// Issue 36: `ditgen --config /elsewhere/run.json` from any folder reads the
// model and writes the outputs the file names, relative to the file.
TEST_CASE("relative paths in a config file resolve against its folder, --set paths stay as given") {
  std::filesystem::create_directories(temp_dir() / "cfg");
  const json document = with(with(with(minimal_config(), "model.path", "../models/m"), "output.path", "out/x.png"),
                             "generate.prompt_file", "./prompts.txt");
  const json text_model = without(document, "generate.class_labels");
  const std::string path = write_config(text_model, "cfg/run.json");
  const RunConfig c = load_config(path, {});
  CHECK(c.model.path == (temp_dir() / "models/m").string());
  CHECK(c.output.path == (temp_dir() / "cfg/out/x.png").string());
  CHECK(c.generate.prompt_file == (temp_dir() / "cfg/prompts.txt").string());
  CHECK(c.source_json == text_model);  // the file as written

  // Absolute paths stand; --set (and --output / --prompt-file, which are
  // --set entries) name places relative to the current folder.
  const RunConfig set = load_config(path, {"model.path=/abs/m", "output.path=o/y.png", "generate.prompt_file=p.txt"});
  CHECK(set.model.path == "/abs/m");
  CHECK(set.output.path == "o/y.png");
  CHECK(set.generate.prompt_file == "p.txt");

  // A config named relative to the current folder gives paths relative to it
  // too: the shipped configs' "../samples/..." read as "samples/..." from
  // the repository root, exactly as before.
  const auto here = std::filesystem::current_path();
  std::filesystem::current_path(temp_dir());
  const RunConfig relative = load_config("cfg/run.json", {});
  std::filesystem::current_path(here);
  CHECK(relative.model.path == "models/m");
  CHECK(relative.output.path == "cfg/out/x.png");
  CHECK(relative.generate.prompt_file == "cfg/prompts.txt");
}

}  // namespace ditgen::test
