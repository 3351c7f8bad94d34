// Every validation rule of config.h: each bad value gives a ConfigError whose
// message names the file and the dotted path. Table-driven: one row per rule.
#include "config_test_support.h"

namespace ditgen::test {

namespace {

struct BadValue {
  const char* path;       // dotted path to set
  json value;             // the bad value
  const char* expected;   // a fragment the message must contain (beyond file and path)
};

void check_rejected(const json& document, const std::string& reported_path, const std::string& expected) {
  const std::string message = load_error(document);
  INFO("message: " << message);
  CHECK(contains(message, "run.json: " + reported_path + ": "));
  CHECK(contains(message, expected));
}

}  // namespace

TEST_CASE("sp_weights: each weight a positive integer, named by its index") {
  check_rejected(with(minimal_config(), "parallel.sp_weights", {1, 0}), "parallel.sp_weights[1]",
                 "expected a positive integer, got 0");
  check_rejected(with(minimal_config(), "parallel.sp_weights", {1.5, 1}), "parallel.sp_weights[0]",
                 "expected a positive integer");
}

TEST_CASE("type and range checks name the file and the dotted path") {
  const std::vector<BadValue> rows = {
      {"generate.steps", 0, "expected a positive integer, got 0"},
      {"generate.steps", -3, "expected a positive integer, got -3"},
      {"generate.steps", "fifty", "expected a positive integer, got \"fifty\""},
      {"generate.steps", 50.0, "expected a positive integer"},
      {"generate.steps", 1e12, "expected a positive integer"},
      {"generate.steps", 10000000000, "up to 2147483647"},
      {"generate.batch_size", 0, "expected a positive integer"},
      {"generate.guidance_scale", -0.5, "expected a non-negative number, got -0.5"},
      {"generate.guidance_scale", "4", "expected a number, got \"4\""},
      {"generate.seed", -1, "expected a non-negative integer, got -1"},
      {"generate.seed", 1.5, "expected a non-negative integer"},
      {"generate.seed", "0", "expected a non-negative integer"},
      {"generate.seed", 1e30, "expected a non-negative integer"},
      {"generate.frames", -1, "expected a positive integer"},
      {"generate.height", -8, "expected a positive integer"},
      {"generate.width", "256", "expected a positive integer"},
      {"generate.scheduler", "heun", "expected one of \"\", \"ddim\", \"dpmpp_2m\", \"unipc\", \"euler\", got \"heun\""},
      {"generate.shift", 0, "expected a positive number, got 0"},
      {"generate.scheduler", "dpmpp2m", "did you mean \"dpmpp_2m\"?"},
      {"generate.negative_prompt", 3, "expected a string"},
      {"parallel.sp", 0, "expected a positive integer"},
      {"parallel.cp", 0, "expected a positive integer"},
      {"parallel.tp", 0, "expected a positive integer"},
      {"parallel.cp", 3, "expected 1 or 2"},
      {"parallel.sp_mode", "tree", "expected one of \"auto\", \"ulysses\", \"ring\", \"dsp\", \"naive_patch\""},
      {"parallel.pp", 0, "expected a positive integer"},
      {"parallel.patches", -1, "expected a non-negative integer"},
      {"parallel.warmup_steps", 0, "expected a positive integer"},
      {"parallel.sp_weights", 2, "expected a list (JSON array), got 2"},
      {"parallel.sp_weights", json::array(), "expected one weight per rank, got an empty list"},
      {"model.dtype", "fp32", "expected one of \"auto\", \"float32\", \"bfloat16\", \"float16\""},
      {"model.path", "", "expected a non-empty string"},
      {"model.path", 5, "expected a string"},
      {"output.format", "gif", "expected one of \"png\", \"mp4\""},
      {"output.fps", 0, "expected a positive number, got 0"},
      {"output.fps", -8, "expected a positive number"},
      {"output.fps", 1001, "expected frames per second in [0.001, 1000], got 1001"},
      {"output.fps", 0.0001, "expected frames per second in [0.001, 1000]"},
      {"output.crf", 52, "expected an integer in 0..51 (x264's constant rate factor), got 52"},
      {"output.crf", -1, "expected a non-negative integer, got -1"},
      {"output.crf", 18.5, "expected a non-negative integer"},
      {"output.crf", "18", "expected a non-negative integer"},
      {"output.grid", "yes", "expected true or false"},
      {"output.path", json::array(), "expected a string"},
  };
  // The encoder's settings are checked on an mp4 config (with png they are
  // an error of their own, below).
  const json mp4 = with(minimal_config(), "output.format", "mp4");
  for (const auto& row : rows) {
    CAPTURE(row.path);
    CAPTURE(row.value.dump());
    const bool encoder = std::string(row.path) == "output.fps" || std::string(row.path) == "output.crf";
    check_rejected(with(encoder ? mp4 : minimal_config(), row.path, row.value), row.path, row.expected);
  }
}

// Issue 33: fields that do not apply to the run are errors naming the
// field, as unknown keys are. (negative_prompt and max_sequence_length on a
// class-label model: tests/pipeline, where the model's kind is known.)
TEST_CASE("fps and crf with png output are errors naming the field, and a command-line png drops the file's") {
  check_rejected(with(minimal_config(), "output.fps", 8), "output.fps", "applies to mp4 output only");
  check_rejected(with(minimal_config(), "output.crf", 18), "output.crf",
                 "applies to mp4 output only, and output.format is \"png\"");
  const json mp4 = with(with(with(minimal_config(), "output.format", "mp4"), "output.fps", 8), "output.crf", 18);
  const std::string path = write_config(mp4);
  // Issue 43: --set output.format=png on an MP4 config drops the file's
  // fps and crf with a note (config/command_line_rules.h); nulling them works as before.
  const RunConfig dropped = load_config(path, {"output.format=png"});
  CHECK(dropped.output.format == OutputFormat::kPng);
  CHECK(dropped.notes.size() == 1);
  const RunConfig png = load_config(path, {"output.format=png", "output.fps=null", "output.crf=null"});
  CHECK(png.notes.empty());
  CHECK(png.output.format == OutputFormat::kPng);
  CHECK_FALSE(to_json(png)["output"].contains("fps"));  // to_json loads back
  CHECK(to_json(load_config(path, {}))["output"]["fps"] == 8);
}

TEST_CASE("accepted edge values") {
  const std::vector<std::pair<const char*, json>> rows = {
      {"generate.steps", 1},          {"generate.guidance_scale", 0},
      {"generate.guidance_scale", 7}, {"generate.seed", 0},
      {"generate.scheduler", ""},     {"generate.scheduler", "ddim"},
      {"parallel.cp", 2},             {"parallel.sp", 3},
      {"model.dtype", "bfloat16"},    {"output.format", "mp4"},
      {"pab", json::object()},
  };
  for (const auto& row : rows) {  // not a structured binding: clang's OpenMP mode cannot capture one (CAPTURE)
    const char* path = row.first;
    CAPTURE(path);
    CHECK_NOTHROW(load_config(write_config(with(minimal_config(), path, row.second)), {}));
  }
  const json mp4 = with(minimal_config(), "output.format", "mp4");
  for (const auto& row : std::vector<std::pair<const char*, json>>{
           {"output.fps", 0.5}, {"output.fps", 1000}, {"output.fps", 0.001}, {"output.crf", 0}, {"output.crf", 51}}) {
    const char* path = row.first;
    CAPTURE(path);
    CHECK_NOTHROW(load_config(write_config(with(mp4, path, row.second)), {}));
  }
}

TEST_CASE("wrong JSON types: null, object for list, list for object") {
  check_rejected(with(minimal_config(), "generate.steps", nullptr), "generate.steps", "got null");
  check_rejected(with(minimal_config(), "generate.class_labels", json::object()), "generate.class_labels",
                 "expected a list (JSON array), got {}");
  check_rejected(with(minimal_config(), "generate.prompts", "a cat"), "generate.prompts",
                 "expected a list");
  check_rejected(with(minimal_config(), "model", "models/dit"), "model", "expected an object, got \"models/dit\"");
  check_rejected(with(minimal_config(), "parallel", json::array({1, 2})), "parallel", "expected an object");
  check_rejected(with(minimal_config(), "pab", nullptr), "pab", "expected an object, got null");
}

TEST_CASE("list elements are checked with their index") {
  check_rejected(with(minimal_config(), "generate.class_labels", {207, 1.5}), "generate.class_labels[1]",
                 "expected a class id (non-negative integer) or class name (string), got 1.5");
  check_rejected(with(minimal_config(), "generate.class_labels", {-1}), "generate.class_labels[0]",
                 "non-negative integer");
  check_rejected(with(minimal_config(), "generate.class_labels", {""}), "generate.class_labels[0]",
                 "class name");
  json prompts = without(minimal_config(), "generate.class_labels");
  check_rejected(with(prompts, "generate.prompts", {"a cat", 3}), "generate.prompts[1]", "expected a prompt string");
}

TEST_CASE("required fields") {
  check_rejected(without(minimal_config(), "model.path"), "model.path", "required");
  check_rejected(without(minimal_config(), "model"), "model.path", "required");
  check_rejected(without(minimal_config(), "output.path"), "output.path", "required");
  check_rejected(without(minimal_config(), "output"), "output.path", "required");
  check_rejected(without(minimal_config(), "generate.class_labels"), "generate.class_labels", "required");
  // An empty list is named as given (issue 36: prompts: [] spoke of class_labels).
  check_rejected(with(minimal_config(), "generate.class_labels", json::array()), "generate.class_labels",
                 "expected at least one class id or name, got []");
  json prompts_only = with(without(minimal_config(), "generate.class_labels"), "generate.prompts", {"a cat"});
  CHECK_NOTHROW(load_config(write_config(prompts_only), {}));
  check_rejected(with(prompts_only, "generate.prompts", json::array()), "generate.prompts",
                 "expected at least one prompt, got []");
}

// Issue 36: an empty or whitespace-only prompt ran and wrote a video of
// nothing asked for. It is exit 2 naming its index; the negative prompt may
// be empty (its default).
TEST_CASE("an empty or whitespace-only prompt is rejected, naming its index") {
  const json text = without(minimal_config(), "generate.class_labels");
  check_rejected(with(text, "generate.prompts", {"a cat", ""}), "generate.prompts[1]", "the prompt is empty");
  check_rejected(with(text, "generate.prompts", {" \t\n"}), "generate.prompts[0]", "the prompt is only whitespace");
  CHECK_NOTHROW(load_config(write_config(with(with(text, "generate.prompts", {"a cat"}), "generate.negative_prompt", "")),
                            {}));
  // --prompt '' arrives as a --set entry, which the message names.
  const std::string path = write_config(with(text, "generate.prompts", {"a cat"}));
  const std::string message = load_error(path, {"generate.prompts=[\"\"]"});
  CHECK(contains(message, "run.json: generate.prompts[0]: the prompt is empty"));
  CHECK(contains(message, "(from --set generate.prompts=[\"\"])"));
}

TEST_CASE("class_labels and prompts together are ambiguous") {
  check_rejected(with(minimal_config(), "generate.prompts", {"a cat"}), "generate.prompts", "not both");
}

TEST_CASE("pab kinds: range, threshold window and mlp blocks") {
  const json kind = {{"range", 2}, {"threshold", {100, 800}}};
  const json mlp = {{"range", 2}, {"threshold", {100, 800}}, {"blocks", {0, 1}}};
  for (const char* name : {"spatial", "temporal", "cross", "mlp"}) {
    CAPTURE(name);
    const std::string section = std::string("pab.") + name;
    const json base = with(minimal_config(), section, std::string(name) == "mlp" ? mlp : kind);
    CHECK_NOTHROW(load_config(write_config(base), {}));
    check_rejected(with(base, section + ".range", 0), section + ".range", "expected a positive integer");
    check_rejected(without(base, section + ".range"), section + ".range", "required");
    check_rejected(without(base, section + ".threshold"), section + ".threshold", "required");
    check_rejected(with(base, section + ".threshold", {800, 100}), section + ".threshold", "low < high");
    check_rejected(with(base, section + ".threshold", {100, 100}), section + ".threshold", "low < high");
    check_rejected(with(base, section + ".threshold", {100}), section + ".threshold", "two numbers");
    check_rejected(with(base, section + ".threshold", "100-800"), section + ".threshold", "expected a list");
    check_rejected(with(base, section + ".threshold", {"a", 800}), section + ".threshold[0]", "expected a number");
    check_rejected(with(base, section, 2), section, "expected an object");
  }
  const json base = with(minimal_config(), "pab.mlp", mlp);
  check_rejected(with(base, "pab.mlp.blocks", {0, -1}), "pab.mlp.blocks[1]", "non-negative integer");
  check_rejected(with(base, "pab.mlp.blocks", {0, 1.5}), "pab.mlp.blocks[1]", "non-negative integer");
  check_rejected(with(base, "pab.mlp.blocks", json::array()), "pab.mlp.blocks", "at least one block");
  check_rejected(without(base, "pab.mlp.blocks"), "pab.mlp.blocks", "required");
  check_rejected(with(base, "pab.mlp.blocks", 3), "pab.mlp.blocks", "expected a list");
}

TEST_CASE("cache: kind, threshold and teacache coefficients") {
  const json fbc = {{"kind", "first_block"}, {"threshold", 0.05}};
  const json base = with(minimal_config(), "cache", fbc);
  const RunConfig c = load_config(write_config(base), {});
  REQUIRE(c.cache.enabled());
  CHECK(*c.cache.kind == CacheKind::kFirstBlock);
  CHECK(c.cache.threshold == 0.05);
  CHECK_FALSE(load_config(write_config(with(minimal_config(), "cache", json::object())), {}).cache.enabled());
  CHECK_FALSE(load_config(write_config(minimal_config()), {}).cache.enabled());
  const json tea = with(with(base, "cache.kind", "teacache"), "cache.coefficients", {1, -2, 3, -4, 0.5});
  const RunConfig t = load_config(write_config(tea), {});
  CHECK(*t.cache.kind == CacheKind::kTeaCache);
  CHECK(t.cache.coefficients == std::vector<double>{1, -2, 3, -4, 0.5});
  CHECK(load_config(write_config(without(tea, "cache.coefficients")), {}).cache.coefficients.empty());

  check_rejected(with(base, "cache.kind", "first-block"), "cache.kind",
                 "expected one of \"first_block\", \"teacache\", got \"first-block\"");
  check_rejected(with(base, "cache.kind", "fbcache"), "cache.kind", "expected one of");
  check_rejected(without(base, "cache.kind"), "cache.kind", "required");
  check_rejected(without(base, "cache.threshold"), "cache.threshold", "required");
  check_rejected(with(base, "cache.threshold", 0), "cache.threshold", "expected a positive number, got 0");
  check_rejected(with(base, "cache.threshold", -0.1), "cache.threshold", "expected a positive number, got -0.1");
  check_rejected(with(base, "cache.threshold", "0.05"), "cache.threshold", "expected a number");
  check_rejected(with(tea, "cache.coefficients", {1, 2, 3}), "cache.coefficients", "expected 5 numbers");
  check_rejected(with(tea, "cache.coefficients", json::array()), "cache.coefficients", "expected 5 numbers");
  check_rejected(with(tea, "cache.coefficients", 1), "cache.coefficients", "expected a list");
  check_rejected(with(tea, "cache.coefficients", {1, 2, "x", 4, 5}), "cache.coefficients[2]", "expected a number");
  check_rejected(with(base, "cache.coefficients", {1, 2, 3, 4, 5}), "cache.coefficients",
                 "applies to kind \"teacache\" only");
  check_rejected(with(base, "cache.window", 3), "cache.window", "unknown key");
  check_rejected(with(minimal_config(), "cache", 0.05), "cache", "expected an object");
}

TEST_CASE("a cache section round-trips through to_json, and none is written when off") {
  const json tea = with(minimal_config(), "cache",
                        json{{"kind", "teacache"}, {"threshold", 0.1}, {"coefficients", {1, 2, 3, 4, 5}}});
  const RunConfig first = load_config(write_config(tea), {});
  const RunConfig second = load_config(write_config(to_json(first), "roundtrip.json"), {});
  CHECK(second.cache == first.cache);
  CHECK_FALSE(to_json(load_config(write_config(minimal_config()), {})).contains("cache"));
}

TEST_CASE("unknown keys are rejected with a did-you-mean") {
  SUBCASE("typo of a sibling") {
    const std::string message = load_error(with(minimal_config(), "generate.stpes", 20));
    CHECK(contains(message, "run.json: generate.stpes: unknown key (did you mean generate.steps?)"));
  }
  SUBCASE("typo of a section") {
    json document = minimal_config();
    document["paralel"] = {{"sp", 1}};
    CHECK(contains(load_error(document), "run.json: paralel: unknown key (did you mean parallel?)"));
  }
  SUBCASE("a key in the wrong section") {
    CHECK(contains(load_error(with(minimal_config(), "generate.fps", 8)),
                   "generate.fps: unknown key (did you mean output.fps?)"));
    CHECK(contains(load_error(with(minimal_config(), "pab.spatial",
                                   {{"range", 2}, {"threshold", {1, 2}}, {"blocks", {0}}})),
                   "pab.spatial.blocks: unknown key (did you mean pab.mlp.blocks?)"));
  }
  SUBCASE("nothing close") {
    const std::string message = load_error(with(minimal_config(), "output.zzzzzz", 1));
    CHECK(contains(message, "run.json: output.zzzzzz: unknown key"));
    CHECK_FALSE(contains(message, "did you mean"));
  }
  SUBCASE("unknown keys win over type errors elsewhere") {
    json document = with(minimal_config(), "generate.steps", "fifty");
    CHECK(contains(load_error(with(document, "model.pth", "x")), "model.pth: unknown key"));
  }
}

}  // namespace ditgen::test
