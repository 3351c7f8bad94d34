// How the command line's values settle the file's (config/command_line_rules.h,
// issue 43): the output's extension decides its format, fields a command-line
// value made inapplicable are dropped with a note (the file's own stay
// errors), command-line prompt sources replace the file's, and messages name
// the flag the user typed. Each case loads a real file with load_config, as
// the CLI does, with the --set entries parse_cli makes.
#include <sstream>

#include "config/cli_options.h"
#include "config/command_line_rules.h"
#include "config_test_support.h"

namespace ditgen::test {

namespace {

// load_config as run_generate calls it: the file plus the command line's
// entries and what the user typed for each.
RunConfig load_with_flags(const std::string& config, std::vector<std::string> args) {
  args.insert(args.begin(), {"ditgen", "--config", config});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  const CliOptions o = parse_cli(static_cast<int>(argv.size()), argv.data(), out);
  return load_config(o.config_path, o.set_overrides, o.override_origins);
}

std::string flags_error(const std::string& config, const std::vector<std::string>& args) {
  try {
    load_with_flags(config, args);
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL_CHECK("expected a ConfigError");
  return "";
}

json mp4_config() {
  return with(with(with(with(minimal_config(), "output.path", "out/clip.mp4"), "output.format", "mp4"), "output.fps", 8),
              "output.crf", 18);
}

bool has_note(const RunConfig& c, const std::string& part) {
  for (const std::string& note : c.notes)
    if (contains(note, part)) return true;
  return false;
}

}  // namespace

TEST_CASE("the output path's extension decides the format when the command line does not give it") {
  const std::string mp4 = write_config(mp4_config(), "mp4.json");
  // --output x.png on an MP4 config writes PNG, and the file's fps and crf go, said once.
  const RunConfig png = load_with_flags(mp4, {"--output", "x.png"});
  CHECK(png.output.format == OutputFormat::kPng);
  CHECK(png.output.path == "x.png");
  REQUIRE(png.notes.size() == 1);
  CHECK(png.notes[0] == "output.fps and output.crf are dropped: mp4 output only takes them, and --output x.png "
                        "writes png");
  CHECK_FALSE(to_json(png)["output"].contains("fps"));
  // --set output.path does the same; an upper-case extension counts.
  CHECK(load_with_flags(mp4, {"--set", "output.path=y.PNG"}).output.format == OutputFormat::kPng);
  // A PNG config told --output x.mp4 writes MP4 (nothing to drop).
  const std::string png_config = write_config(minimal_config(), "png.json");
  const RunConfig video = load_with_flags(png_config, {"--output", "clip.mp4"});
  CHECK(video.output.format == OutputFormat::kMp4);
  CHECK(video.notes.empty());
  // An extension that names neither keeps the file's format.
  CHECK(load_with_flags(mp4, {"--output", "clip.video"}).output.format == OutputFormat::kMp4);
  // A file without output.format: its path's extension decides (docs/design.md §2).
  const std::string no_format = write_config(with(minimal_config(), "output.path", "out/a.mp4"), "noformat.json");
  CHECK(load_config(no_format, {}).output.format == OutputFormat::kMp4);
  CHECK(config::output_format_of_extension("out/dir.mp4/a") == "");
  CHECK(config::output_format_of_extension("out/.png") == "");
}

TEST_CASE("--set output.format=png on an MP4 config drops the file's fps and crf with a note") {
  const std::string mp4 = write_config(mp4_config(), "mp4.json");
  const RunConfig png = load_with_flags(mp4, {"--set", "output.format=png"});
  CHECK(png.output.format == OutputFormat::kPng);
  CHECK(has_note(png, "and --set output.format=png writes png"));
  // Given together and agreeing: fine; disagreeing: exit 2 naming both.
  CHECK(load_with_flags(mp4, {"--set", "output.format=png", "--output", "a.png"}).output.format == OutputFormat::kPng);
  const std::string clash = flags_error(mp4, {"--set", "output.format=mp4", "--output", "a.png"});
  CHECK(contains(clash, "output.format: \"mp4\" does not write a .png file, and output.path \"a.png\" (from --output "
                        "a.png) is one"));
  CHECK(contains(clash, "(from --set output.format=mp4)"));
  // fps given on the command line with png is still an error, naming it.
  const std::string fps = flags_error(mp4, {"--output", "a.png", "--set", "output.fps=10"});
  CHECK(contains(fps, "output.fps: applies to mp4 output only, and output.format is \"png\""));
  CHECK(contains(fps, "(from --set output.fps=10)"));
  // A file that itself sets fps with png stays an error.
  const json own = with(with(minimal_config(), "output.format", "png"), "output.fps", 8);
  CHECK(contains(flags_error(write_config(own, "own.json"), {"--output", "b.png"}),
                 "output.fps: applies to mp4 output only"));
}

TEST_CASE("a prompt source on the command line replaces the file's, however given") {
  const json text = without(minimal_config(), "generate.class_labels");
  const std::string prompts = write_config(with(text, "generate.prompts", {"a"}), "prompts.json");
  const RunConfig by_set = load_with_flags(prompts, {"--set", "generate.prompt_file=q.txt"});
  CHECK(by_set.generate.prompts.empty());
  CHECK(by_set.generate.prompt_file == "q.txt");
  CHECK(load_with_flags(prompts, {"--prompt-file", "q.txt"}).generate.prompt_file == "q.txt");
  const std::string file = write_config(with(text, "generate.prompt_file", "p.txt"), "file.json");
  const RunConfig listed = load_with_flags(file, {"--set", "generate.prompts=[\"b\"]"});
  CHECK(listed.generate.prompts == std::vector<std::string>{"b"});
  CHECK(listed.generate.prompt_file.empty());
  CHECK(load_with_flags(file, {"--prompt", "c"}).generate.prompts == std::vector<std::string>{"c"});
  // Both in the file, or both on the command line: which one was meant is unclear.
  CHECK(contains(flags_error(write_config(with(with(text, "generate.prompt_file", "p.txt"), "generate.prompts", {"a"}),
                                          "both.json"),
                             {}),
                 "not both"));
  CHECK(contains(flags_error(prompts, {"--set", "generate.prompt_file=q.txt", "--set", "generate.prompts=[\"d\"]"}),
                 "not both"));
}

TEST_CASE("a message about a flag's value names the flag the user typed") {
  const json text = without(minimal_config(), "generate.class_labels");
  const std::string prompts = write_config(with(text, "generate.prompts", {"a"}), "prompts.json");
  const std::string empty = flags_error(prompts, {"--prompt", ""});
  CHECK(contains(empty, "generate.prompts[0]: the prompt is empty"));
  CHECK(contains(empty, "(from --prompt \"\")"));
  CHECK_FALSE(contains(empty, "--set"));
  CHECK(contains(flags_error(prompts, {"--prompt", "a cat", "--prompt", " "}),
                 "(from --prompt \"a cat\" --prompt \" \")"));
  CHECK(contains(flags_error(write_config(minimal_config(), "w.json"), {"--output", ""}), "(from --output \"\")"));
}

TEST_CASE("generate.frames, height and width of 0 are errors, not the model's default") {
  for (const char* key : {"generate.frames", "generate.height", "generate.width"}) {
    CAPTURE(key);
    CHECK(contains(load_error(with(minimal_config(), key, 0)), std::string(key) + ": expected a positive integer, got 0"));
  }
}

TEST_CASE("sp_mode with sp 1, patches or warmup_steps with pp 1: errors, dropped if the command line made them so") {
  const json ring = with(with(minimal_config(), "parallel.sp", 1), "parallel.sp_mode", "ring");
  CHECK(contains(load_error(ring), "parallel.sp_mode: applies to sequence parallelism and PipeFusion only "
                                   "(parallel.sp or parallel.pp > 1), and both are 1"));
  // PipeFusion shares its patches by sp_mode: with pp 2 it applies.
  CHECK_NOTHROW(load_config(write_config(with(with(minimal_config(), "parallel.pp", 2), "parallel.sp_mode", "ulysses")),
                            {}));
  CHECK_NOTHROW(load_config(write_config(with(minimal_config(), "parallel.sp_mode", "auto")), {}));
  CHECK(contains(load_error(with(minimal_config(), "parallel.patches", 4)),
                 "parallel.patches: applies to PipeFusion only (parallel.pp > 1), and parallel.pp is 1"));
  CHECK(contains(load_error(with(minimal_config(), "parallel.warmup_steps", 2)), "parallel.warmup_steps: applies to "
                                                                                  "PipeFusion only"));
  // The same fields on the command line are errors too, naming the --set.
  CHECK(contains(load_error(write_config(minimal_config()), {"parallel.sp_mode=ring"}),
                 "(from --set parallel.sp_mode=ring)"));
  // A file made for sp 2 run with --set parallel.sp=1: its sp_mode is dropped, said once.
  const std::string sp2 = write_config(with(with(minimal_config(), "parallel.sp", 2), "parallel.sp_mode", "ring"),
                                       "sp2.json");
  const RunConfig one = load_with_flags(sp2, {"--set", "parallel.sp=1"});
  CHECK(one.parallel.sp == 1);
  CHECK(one.parallel.sp_mode == parallel::SpMode::kAuto);
  REQUIRE(one.notes.size() == 1);
  CHECK(one.notes[0] == "parallel.sp_mode is dropped: sequence parallelism (parallel.sp > 1) only takes them, and "
                        "--set parallel.sp=1 makes parallel.sp 1");
  const json pp2 = with(with(with(minimal_config(), "parallel.pp", 2), "parallel.patches", 4), "parallel.warmup_steps", 2);
  const RunConfig pp1 = load_with_flags(write_config(pp2, "pp2.json"), {"--set", "parallel.pp=1"});
  CHECK(pp1.parallel.patches == 0);
  CHECK(pp1.parallel.warmup_steps == 1);
  CHECK(has_note(pp1, "parallel.patches and parallel.warmup_steps are dropped"));
  // sp made 1 while pp stays 2: sp_mode still applies (PipeFusion), kept.
  const json sp2_pp2 = with(with(with(minimal_config(), "parallel.sp", 2), "parallel.pp", 2), "parallel.sp_mode",
                            "ulysses");
  const RunConfig kept = load_with_flags(write_config(sp2_pp2, "sp2pp2.json"), {"--set", "parallel.sp=1"});
  CHECK(kept.parallel.sp_mode == parallel::SpMode::kUlysses);
  CHECK(kept.notes.empty());
}

TEST_CASE("model.source: a string, kept, written back") {
  const RunConfig c =
      load_config(write_config(with(minimal_config(), "model.source", "facebook/DiT-XL-2-256")), {});
  CHECK(c.model.source == "facebook/DiT-XL-2-256");
  CHECK(to_json(c)["model"]["source"] == "facebook/DiT-XL-2-256");
  CHECK_FALSE(to_json(load_config(write_config(minimal_config()), {}))["model"].contains("source"));
  CHECK(contains(load_error(with(minimal_config(), "model.source", 3)), "model.source"));
}

TEST_CASE("did-you-mean from other tools' names: diffusers, stable-diffusion.cpp, xDiT") {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"generate.cfg_scale", "generate.guidance_scale"}, {"generate.num_inference_steps", "generate.steps"},
      {"generate.num_frames", "generate.frames"},        {"generate.sampling_method", "generate.scheduler"},
      {"generate.flow_shift", "generate.shift"},         {"parallel.ulysses_degree", "parallel.sp"},
      {"model.torch_dtype", "model.dtype"},              {"num_inference_steps", "generate.steps"},
  };
  for (const auto& [key, meant] : rows) {
    CAPTURE(key);
    CHECK(contains(load_error(with(minimal_config(), key, 1)), key + ": unknown key (did you mean " + meant + "?)"));
  }
}

TEST_CASE("a damaged JSON file's message escapes the bytes it stopped at") {
  // A byte that is not UTF-8 inside a string: nlohmann's message quotes it raw.
  const std::string binary = write_file(std::string("{\"model\": \"\xff\xfe\x80\"}"), "binary.json");
  const std::string message = load_error(binary);
  CHECK(contains(message, "invalid JSON"));
  CHECK(contains(message, "last read: '\"\\xFF'"));
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    CHECK((byte >= 0x20 && byte < 0x7f));
  }
}

}  // namespace ditgen::test
