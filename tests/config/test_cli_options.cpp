// parse_cli on sample command lines: defaults, every option, the plan
// subcommand, help/version, errors as ConfigError (exit 2), and the
// precedence config < --set < dedicated flags; --lora appending to the
// config's lora list (and `--set key+=value`).
#include <sstream>

#include "config/cli_options.h"
#include "config_test_support.h"

namespace ditgen::test {

namespace {

CliOptions parse(std::vector<std::string> args, std::ostream& out) {
  args.insert(args.begin(), "ditgen");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_cli(static_cast<int>(argv.size()), argv.data(), out);
}

CliOptions parse(const std::vector<std::string>& args) {
  std::ostringstream out;
  return parse(args, out);
}

// The message of the ConfigError that parsing throws.
std::string parse_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL_CHECK("expected a ConfigError");
  return "";
}

}  // namespace

TEST_CASE("--config alone gives the defaults") {
  const CliOptions o = parse({"--config", "run.json"});
  CHECK(o.command == CliOptions::Command::generate);
  CHECK_FALSE(o.exit_now);
  CHECK(o.config_path == "run.json");
  CHECK(o.set_overrides.empty());
  CHECK(o.device == "auto");
  CHECK(o.threads == 0);
  CHECK(o.attention == "auto");
  CHECK(o.init_noise.empty());
  CHECK(o.save_latents.empty());
  CHECK(o.pab_stats.empty());
  CHECK(o.pab_analyze.empty());
  CHECK_FALSE(o.quiet);
}

TEST_CASE("every option parses") {
  const std::string noise = write_file("x", "noise.safetensors");
  const CliOptions o = parse({"--config", "run.json", "--device", "cpu", "--threads", "3", "--attention", "math",
                              "--init-noise", noise, "--save-latents", "lat.safetensors", "--pab-stats",
                              "pab.json", "--pab-analyze", "pabdir", "--quiet"});
  CHECK(o.device == "cpu");
  CHECK(o.threads == 3);
  CHECK(o.attention == "math");
  CHECK(o.init_noise == noise);
  CHECK(o.save_latents == "lat.safetensors");
  CHECK(o.pab_stats == "pab.json");
  CHECK(o.pab_analyze == "pabdir");
  CHECK(o.quiet);
}

TEST_CASE("options main rejects later still parse") {
  const CliOptions o = parse({"--config", "run.json", "--device", "cuda", "--attention", "flash"});
  CHECK(o.device == "cuda");
  CHECK(o.attention == "flash");
  CHECK(parse({"--config=run.json"}).config_path == "run.json");
}

TEST_CASE("repeated --set accumulate in order, --set=k=v works") {
  const CliOptions o = parse({"--set", "generate.steps=5", "--config", "run.json", "--set=parallel.sp=2"});
  CHECK(o.set_overrides == std::vector<std::string>{"generate.steps=5", "parallel.sp=2"});
}

TEST_CASE("dedicated flags become --set entries after the user's") {
  const CliOptions o = parse({"--config", "run.json", "--steps", "10", "--set", "generate.steps=5", "--seed", "7",
                              "--output", "true"});
  CHECK(o.set_overrides == std::vector<std::string>{"generate.steps=5", "output.path=\"true\"",
                                                     "generate.seed=7", "generate.steps=10"});
}

TEST_CASE("precedence: config file < --set < --steps") {
  const std::string config = write_config(with(minimal_config(), "generate.steps", 50));
  const RunConfig from_set = load_config(config, parse({"--config", config, "--set", "generate.steps=5"}).set_overrides);
  CHECK(from_set.generate.steps == 5);
  const CliOptions both = parse({"--config", config, "--steps", "10", "--set", "generate.steps=5", "--seed", "3",
                                 "--output", "out/x_{i}.png"});
  const RunConfig c = load_config(both.config_path, both.set_overrides);
  CHECK(c.generate.steps == 10);
  CHECK(c.generate.seed == 3);
  CHECK(c.output.path == "out/x_{i}.png");
}

TEST_CASE("--seed and --steps take decimal integers only") {
  CHECK(parse({"--config", "r.json", "--seed", "18446744073709551615"}).set_overrides ==
        std::vector<std::string>{"generate.seed=18446744073709551615"});
  CHECK(parse({"--config", "r.json", "--seed", "010"}).set_overrides ==
        std::vector<std::string>{"generate.seed=10"});  // not octal
  CHECK(contains(parse_error({"--config", "r.json", "--seed", "-1"}), "--seed"));
  CHECK(contains(parse_error({"--config", "r.json", "--seed", "18446744073709551616"}), "--seed"));
  CHECK(contains(parse_error({"--config", "r.json", "--seed", "0x10"}), "--seed"));
  CHECK(contains(parse_error({"--config", "r.json", "--steps", "0"}), "--steps"));
  CHECK(contains(parse_error({"--config", "r.json", "--steps", "fifty"}), "--steps: expected a positive integer"));
}

TEST_CASE("--frames sets generate.frames after --steps, a positive decimal integer only") {
  CHECK(parse({"--config", "r.json", "--frames", "16", "--steps", "4"}).set_overrides ==
        std::vector<std::string>{"generate.steps=4", "generate.frames=16"});
  const std::string config = write_config(with(minimal_config(), "generate.frames", 3));
  const CliOptions o = parse({"--config", config, "--set", "generate.frames=5", "--frames", "1"});
  CHECK(load_config(o.config_path, o.set_overrides).generate.frames == 1);
  CHECK(contains(parse_error({"--config", "r.json", "--frames", "0"}), "--frames: expected a positive integer"));
  CHECK(contains(parse_error({"--config", "r.json", "--frames", "-3"}), "--frames"));
  CHECK(contains(parse_error({"--config", "r.json", "--frames", "eight"}), "--frames"));
}

TEST_CASE("command line errors are ConfigErrors with CLI11's message") {
  CHECK(contains(parse_error({}), "--config is required"));
  CHECK(contains(parse_error({"--quiet"}), "--config"));
  CHECK(contains(parse_error({"--config", "r.json", "--bogus"}), "--bogus"));
  CHECK(contains(parse_error({"--config"}), "--config"));
  CHECK(contains(parse_error({"--config", "r.json", "--device", "tpu"}), "--device"));
  CHECK(contains(parse_error({"--config", "r.json", "--attention", "fast"}), "--attention"));
  CHECK(contains(parse_error({"--config", "r.json", "--threads", "-2"}), "--threads"));
  CHECK(contains(parse_error({"--config", "r.json", "--threads", "many"}), "--threads"));
  CHECK(contains(parse_error({"--config", "r.json", "--init-noise", "/no/such/noise.safetensors"}), "--init-noise"));
}

TEST_CASE("--help prints usage and asks main to exit 0") {
  std::ostringstream out;
  const CliOptions o = parse({"--help"}, out);
  CHECK(o.exit_now);
  CHECK(contains(out.str(), "--config"));
  CHECK(contains(out.str(), "--set"));
  CHECK(contains(out.str(), "plan"));
}

TEST_CASE("--version prints the version") {
  std::ostringstream out;
  const CliOptions o = parse({"--version"}, out);
  CHECK(o.exit_now);
  CHECK(contains(out.str(), "ditgen 0.1.0"));
}

TEST_CASE("plan subcommand") {
  const CliOptions o = parse({"plan", "--config", "run.json", "--world-size", "8", "--set", "parallel.sp=2"});
  CHECK(o.command == CliOptions::Command::plan);
  CHECK(o.config_path == "run.json");
  CHECK(o.world_size == 8);
  CHECK(o.set_overrides == std::vector<std::string>{"parallel.sp=2"});
  CHECK(parse({"plan", "--config", "run.json"}).world_size == 0);
  CHECK(contains(parse_error({"plan"}), "--config"));
  CHECK(contains(parse_error({"plan", "--config", "r.json", "--world-size", "0"}), "--world-size"));
  std::ostringstream out;
  CHECK(parse({"plan", "--help"}, out).exit_now);
  CHECK(contains(out.str(), "--world-size"));
}

TEST_CASE("default_threads divides the cores among the ranks, at least 1") {
  const int all = default_threads(1);
  CHECK(all >= 1);
  CHECK(default_threads(0) == all);
  CHECK(default_threads(2) == std::max(1, all / 2));
  CHECK(default_threads(1 << 20) == 1);
}

}  // namespace ditgen::test

namespace ditgen::test {

TEST_CASE("batch flags: --prompt-file replaces both prompt sources, --resume sets output.skip_existing") {
  const CliOptions file = parse({"--config", "run.json", "--prompt-file", "p.jsonl", "--resume", "--text-cache", "tc"});
  CHECK(file.set_overrides == std::vector<std::string>{"generate.prompts=[]", "generate.prompt_file=\"p.jsonl\"",
                                                       "output.skip_existing=true"});
  CHECK(file.text_cache == "tc");
  const CliOptions prompt = parse({"--config", "run.json", "--prompt", "a cat"});
  CHECK(prompt.set_overrides == std::vector<std::string>{"generate.prompts=[\"a cat\"]", "generate.prompt_file=\"\""});
  CHECK(parse({"--config", "run.json"}).text_cache.empty());
  // Both prompt sources on one command line: which one wins would be a guess.
  CHECK(parse_error({"--config", "run.json", "--prompt", "a", "--prompt-file", "p.txt"}).find("--prompt") !=
        std::string::npos);
  // A real typo is still an unknown option.
  CHECK(parse_error({"--config", "run.json", "--promt", "a"}).find("not supported yet") == std::string::npos);
}

}  // namespace ditgen::test

namespace ditgen::test {

TEST_CASE("--image and --last-image set generate.image / generate.last_image, relative to the current folder") {
  const CliOptions o = parse({"--config", "run.json", "--image", "in/first.png", "--last-image", "last.jpg"});
  CHECK(o.set_overrides ==
        std::vector<std::string>{"generate.image=\"in/first.png\"", "generate.last_image=\"last.jpg\""});
  CHECK(o.override_origins == std::vector<std::string>{"--image in/first.png", "--last-image last.jpg"});
  CHECK(parse({"--config", "run.json"}).set_overrides.empty());
}

TEST_CASE("encode: its options, and what it requires") {
  std::ostringstream out;
  const char* argv[] = {"ditgen", "encode", "--model", "m", "--prompt", "a cat", "--prompt", "b",
                        "--output", "e.safetensors", "--max-sequence-length", "24", "--dtype", "bfloat16",
                        "--ids-only", "--threads", "2"};
  const CliOptions o = parse_cli(17, argv, out);
  CHECK(o.command == CliOptions::Command::encode);
  CHECK(o.encode.model_dir == "m");
  CHECK(o.encode.prompts == std::vector<std::string>{"a cat", "b"});
  CHECK(o.encode.output == "e.safetensors");
  CHECK(o.encode.max_sequence_length == 24);
  CHECK(o.encode.dtype == DTypeChoice::kBFloat16);
  CHECK(o.encode.ids_only);
  CHECK(o.threads == 2);
  CHECK(parse_error({"encode", "--model", "m", "--output", "e.safetensors"}).find("--prompt") != std::string::npos);
  CHECK(parse_error({"encode", "--model", "m", "--prompt", "a"}).find("--output") != std::string::npos);
  CHECK(parse_error({"encode", "--model", "m", "--prompt", "a", "--prompt-file", "p.txt", "--output", "e"})
            .find("excludes") != std::string::npos);
  CHECK(parse_error({"encode", "--model", "m", "--prompt", "a", "--output", "e", "--dtype", "float8"}).size() > 0);
  CHECK(parse_error({"encode", "--model", "m", "--prompt", "a", "--output", "e", "--max-sequence-length", "0"})
            .size() > 0);
}

TEST_CASE("convert: its options, what it requires, and --help") {
  const CliOptions o = parse({"convert", "--input", "m", "--component", "vae", "--type", "q8_0", "--output", "v.gguf",
                              "--threads", "3", "--quiet"});
  CHECK(o.command == CliOptions::Command::convert);
  CHECK(o.convert.input == "m");
  CHECK(o.convert.component == "vae");
  CHECK(o.convert.type == "q8_0");
  CHECK(o.convert.output == "v.gguf");
  CHECK(o.threads == 3);
  CHECK(o.quiet);
  CHECK(parse({"convert", "--input", "m", "--type", "f16", "--output", "t.gguf"}).convert.component == "transformer");
  CHECK(parse_error({"convert", "--type", "f16", "--output", "t.gguf"}).find("--input") != std::string::npos);
  CHECK(parse_error({"convert", "--input", "m", "--output", "t.gguf"}).find("--type") != std::string::npos);
  CHECK(parse_error({"convert", "--input", "m", "--type", "f16"}).find("--output") != std::string::npos);
  std::ostringstream out;
  CHECK(parse({"convert", "--help"}, out).exit_now);
  for (const char* option : {"--input", "--component", "--type", "--output", "q4_k", "transformer_2"})
    CHECK(contains(out.str(), option));
  std::ostringstream top;
  parse({"--help"}, top);
  CHECK(contains(top.str(), "convert"));
}

}  // namespace ditgen::test

namespace ditgen::test {

TEST_CASE("--prompt and --negative-prompt become generate.prompts / generate.negative_prompt overrides") {
  std::ostringstream out;
  const char* argv[] = {"ditgen", "--config", "r.json", "--set", "generate.steps=3", "--prompt", "a \"cat\"",
                        "--prompt", "dog", "--negative-prompt", "blur", "--seed", "5"};
  const CliOptions o = parse_cli(13, argv, out);
  REQUIRE(o.set_overrides.size() == 5);
  CHECK(o.set_overrides[0] == "generate.steps=3");
  CHECK(o.set_overrides[1] == "generate.prompts=[\"a \\\"cat\\\"\",\"dog\"]");
  CHECK(o.set_overrides[2] == "generate.prompt_file=\"\"");  // --prompt replaces a config's prompt file too
  CHECK(o.set_overrides[3] == "generate.negative_prompt=\"blur\"");
  CHECK(o.set_overrides[4] == "generate.seed=5");
}

}  // namespace ditgen::test

namespace ditgen::test {

// Issue 43: the shorthands other tools taught users, and a did-you-mean for
// the names those tools use.
TEST_CASE("--guidance (alias --cfg-scale), -H/--height and -W/--width become their fields' --set entries") {
  const CliOptions o = parse({"--config", "r.json", "--guidance", "7.5", "-H", "256", "--width", "320"});
  CHECK(o.set_overrides == std::vector<std::string>{"generate.guidance_scale=7.5", "generate.height=256",
                                                    "generate.width=320"});
  CHECK(o.override_origins == std::vector<std::string>{"--guidance 7.5", "-H 256", "--width 320"});
  const CliOptions alias = parse({"--config", "r.json", "--cfg-scale", "3", "--height", "64", "-W", "96"});
  CHECK(alias.set_overrides == std::vector<std::string>{"generate.guidance_scale=3.0", "generate.height=64",
                                                        "generate.width=96"});
  CHECK(alias.override_origins.front() == "--cfg-scale 3");
  // Each flag's value is checked, and the message names the name typed.
  CHECK(contains(parse_error({"--config", "r.json", "--cfg-scale", "-1"}), "--cfg-scale: expected a non-negative number"));
  CHECK(contains(parse_error({"--config", "r.json", "--guidance", "seven"}), "--guidance: expected a non-negative"));
  CHECK(contains(parse_error({"--config", "r.json", "-H", "0"}), "-H: expected a positive integer, got \"0\""));
  CHECK(contains(parse_error({"--config", "r.json", "--width", "1.5"}), "--width: expected a positive integer"));
  // The user's own --set entries have no origin of their own ("--set ..." is said).
  CHECK(parse({"--config", "r.json", "--set", "generate.steps=2"}).override_origins == std::vector<std::string>{""});
}

TEST_CASE("an unknown option is one line with a did-you-mean from ditgen's and other tools' names") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> rows = {
      {{"--config", "r.json", "--cfg", "7"}, "--cfg: no such option; did you mean --guidance?"},
      {{"--config", "r.json", "--cfg=7"}, "--cfg: no such option; did you mean --guidance?"},
      {{"--config", "r.json", "--guidance-scale", "7"}, "did you mean --guidance?"},
      {{"--config", "r.json", "--num-inference-steps", "20"}, "did you mean --steps?"},
      {{"--config", "r.json", "--sampling-steps", "20"}, "did you mean --steps?"},
      {{"--config", "r.json", "--num-frames", "9"}, "did you mean --frames?"},
      {{"--config", "r.json", "--video-frames", "9"}, "did you mean --frames?"},
      {{"--config", "r.json", "-p", "a cat"}, "-p: no such option; did you mean --prompt?"},
      {{"--config", "r.json", "-n", "blur"}, "did you mean --negative-prompt?"},
      {{"--config", "r.json", "-o", "x.png"}, "did you mean --output?"},
      {{"--config", "r.json", "--sampling-method", "euler"}, "did you mean --set generate.scheduler=NAME?"},
      {{"--config", "r.json", "--flow-shift", "3"}, "did you mean --set generate.shift=N?"},
      {{"--config", "r.json", "-m", "models/x"}, "did you mean --set model.path=DIR?"},
      {{"--config", "r.json", "--sead", "1"}, "--sead: no such option; did you mean --seed?"},
      {{"--config", "r.json", "--promt", "a"}, "did you mean --prompt?"},
      {{"plan", "--config", "r.json", "--world", "4"}, "--world: plan has no such option; did you mean --world-size?"},
  };
  for (const auto& [args, expected] : rows) {
    CAPTURE(args.back());
    const std::string message = parse_error(args);
    CHECK_MESSAGE(contains(message, expected), message);
    CHECK(message.find('\n') == std::string::npos);
  }
  CHECK(contains(parse_error({"--config", "r.json", "--bogus-flag"}), "--bogus-flag: no such option (see ditgen --help)"));
  CHECK(contains(parse_error({"--config", "r.json", "stray"}), "\"stray\": unexpected argument"));
}

TEST_CASE("--lora FILE[:SCALE] appends to the lora list, after the file's, and names itself in messages") {
  const CliOptions o = parse({"--config", "run.json", "--lora", "style.safetensors:0.8", "--lora", "b.safetensors",
                              "--lora", "dir:with:colons/c.safetensors:-1.5"});
  const json doc = with(minimal_config(), "lora", json::array({{{"path", "own.safetensors"}}}));
  const RunConfig c = load_config(write_config(doc), o.set_overrides, o.override_origins);
  REQUIRE(c.lora.size() == 4);
  CHECK(c.lora[0].path == (temp_dir() / "own.safetensors").string());
  CHECK(c.lora[1].path == "style.safetensors");  // the command line's: relative to the current folder
  CHECK(c.lora[1].scale == 0.8);
  CHECK(c.lora[2].path == "b.safetensors");
  CHECK(c.lora[2].scale == 1.0);
  CHECK(c.lora[3].path == "dir:with:colons/c.safetensors");
  CHECK(c.lora[3].scale == -1.5);
  // Without a config list, --lora makes one.
  const RunConfig alone = load_config(write_config(minimal_config()), o.set_overrides, o.override_origins);
  CHECK(alone.lora.size() == 3);
  CHECK(contains(parse_error({"--config", "run.json", "--lora", ""}), "--lora"));
  // --set key+=value appends; onto a value that is not a list, an error.
  const RunConfig set = load_config(write_config(minimal_config()), {R"(lora+={"path": "x.safetensors"})"});
  REQUIRE(set.lora.size() == 1);
  CHECK(set.lora[0].path == "x.safetensors");
  CHECK(contains(load_error(write_config(minimal_config()), {"output.path+=x"}), "expected a list"));
}

}  // namespace ditgen::test
