// See cli_options.h. CLI11 builds the parser; --seed, --steps, --frames,
// --height, --width and --guidance are taken as text and checked here,
// because CLI11 (2.1) reads integers with strtoull base 0, which accepts
// "-1" (as 2^64-1) and reads "010" as octal.
#include "config/cli_options.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <utility>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config/did_you_mean.h"
#include "config/foreign_names.h"
#include "config/version.h"
#include "util/error.h"

namespace ditgen {
namespace {

// Decimal digits only, the whole text, within T's range.
template <typename T>
bool parse_decimal(const std::string& text, T& value) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

// A value as a shell user would type it: bare when plain, else quoted.
std::string shell_word(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789_./:=,+-@%") == std::string::npos;
  return plain ? value : nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Which of an option's names the user typed (the last one given), for
// messages: "--cfg-scale" rather than "--guidance" when that is what was
// written.
std::string typed_name(int argc, const char* const* argv, std::initializer_list<const char*> names) {
  std::string typed = *names.begin();
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    for (const char* name : names)
      if (word == name || word.rfind(std::string(name) + "=", 0) == 0) typed = name;
  }
  return typed;
}

// The --set entries, each with what the user typed for it.
class Entries {
 public:
  explicit Entries(CliOptions& options) : options_(options) {}
  void add(const std::string& entry, const std::string& origin) {
    options_.set_overrides.push_back(entry);
    options_.override_origins.push_back(origin);
  }

 private:
  CliOptions& options_;
};

int positive_integer(const std::string& flag, const std::string& text) {
  int value = 0;
  if (!parse_decimal(text, value) || value < 1)
    throw ConfigError(flag + ": expected a positive integer, got \"" + text + "\"");
  return value;
}

// The --set entries of the dedicated flags, after the user's --set list.
struct ValueFlag {
  const CLI::Option* option;
  std::string text;
  std::string typed;  // the name the user wrote
};

void append_flag_overrides(Entries& entries, const ValueFlag& output, const ValueFlag& seed, const ValueFlag& steps,
                           const ValueFlag& frames, const ValueFlag& guidance, const ValueFlag& height,
                           const ValueFlag& width) {
  auto origin = [](const ValueFlag& f) { return f.typed + " " + shell_word(f.text); };
  if (output.option->count() > 0)  // quoted as JSON: "true" or "123" stay paths
    entries.add("output.path=" + nlohmann::json(output.text).dump(), origin(output));
  if (seed.option->count() > 0) {
    std::uint64_t value = 0;
    if (!parse_decimal(seed.text, value))
      throw ConfigError("--seed: expected a non-negative integer, got \"" + seed.text + "\"");
    entries.add("generate.seed=" + std::to_string(value), origin(seed));
  }
  if (steps.option->count() > 0)
    entries.add("generate.steps=" + std::to_string(positive_integer("--steps", steps.text)), origin(steps));
  if (frames.option->count() > 0)
    entries.add("generate.frames=" + std::to_string(positive_integer("--frames", frames.text)), origin(frames));
  if (guidance.option->count() > 0) {
    double value = 0;
    const char* begin = guidance.text.data();
    const auto [end, error] = std::from_chars(begin, begin + guidance.text.size(), value);
    if (guidance.text.empty() || error != std::errc() || end != begin + guidance.text.size() ||
        !std::isfinite(value) || value < 0)
      throw ConfigError(guidance.typed + ": expected a non-negative number (the classifier-free guidance scale), " +
                        "got \"" + guidance.text + "\"");
    entries.add("generate.guidance_scale=" + nlohmann::json(value).dump(), origin(guidance));
  }
  if (height.option->count() > 0)
    entries.add("generate.height=" + std::to_string(positive_integer(height.typed, height.text)), origin(height));
  if (width.option->count() > 0)
    entries.add("generate.width=" + std::to_string(positive_integer(width.typed, width.text)), origin(width));
}

// --lora FILE[:SCALE]: {"path": FILE, "scale": SCALE}. The text after the
// last ':' is the scale when it is a number (a file name may hold colons).
nlohmann::json lora_flag_entry(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    const std::string tail = text.substr(colon + 1);
    double scale = 0;
    const auto [end, error] = std::from_chars(tail.data(), tail.data() + tail.size(), scale);
    if (!tail.empty() && error == std::errc() && end == tail.data() + tail.size()) {
      if (!std::isfinite(scale)) throw ConfigError("--lora " + text + ": the scale must be a finite number");
      return {{"path", text.substr(0, colon)}, {"scale", scale}};
    }
  }
  if (text.empty()) throw ConfigError("--lora: expected FILE[:SCALE], got \"\"");
  return {{"path", text}};
}

// ConfigError for the first argument no option took: an option ditgen does
// not have (with what the user most likely meant), or a stray word.
void reject_extras(const CLI::App& app, const std::vector<std::string>& extras) {
  if (extras.empty()) return;
  const std::string& word = extras.front();
  if (word.size() < 2 || word[0] != '-')
    throw ConfigError("\"" + word + "\": unexpected argument (every value follows its option; see ditgen --help)");
  const std::string option = word.substr(0, word.find('='));
  std::string meant = config::ditgen_option_for_foreign_option(option);
  if (meant.empty()) {  // a typo of one of ditgen's own options
    std::vector<std::string> names;
    for (const CLI::Option* o : app.get_options())
      for (const std::string& name : o->get_lnames()) names.push_back(name);
    const std::string bare = option.substr(option.find_first_not_of('-'));
    if (const std::string close = config::closest_match(bare, names); !close.empty()) meant = "--" + close;
    // Or the start of one ("--world" for --world-size).
    if (meant.empty() && bare.size() >= 3)
      for (const std::string& name : names)
        if (name.rfind(bare, 0) == 0) meant = "--" + name;
  }
  throw ConfigError(option + ": " + (app.get_parent() ? app.get_name() + " has no such option" : "no such option") +
                    (meant.empty() ? "" : "; did you mean " + meant + "?") + " (see ditgen --help)");
}

}  // namespace

CliOptions parse_cli(int argc, const char* const* argv, std::ostream& out) {
  CliOptions options;
  CLI::App app{"ditgen: image and video generation with Diffusion Transformers", "ditgen"};
  app.set_version_flag("--version", std::string("ditgen ") + kDitgenVersion);
  app.require_subcommand(0, 1);
  app.allow_extras();  // reported by reject_extras, with a did-you-mean

  std::string output, seed, steps, frames, guidance, height, width;
  std::vector<std::string> user_sets;
  app.add_option("--config", options.config_path, "JSON run config (required)")->type_name("FILE");
  auto* output_flag = app.add_option("--output", output, "output path (overrides output.path)")->type_name("PATH");
  auto* seed_flag = app.add_option("--seed", seed, "base seed; output i uses seed + i (overrides generate.seed)")
                        ->type_name("N");
  auto* steps_flag = app.add_option("--steps", steps, "denoising steps (overrides generate.steps)")->type_name("N");
  auto* frames_flag = app.add_option("--frames", frames, "video frames per output (video models; overrides "
                                                         "generate.frames)")->type_name("N");
  auto* guidance_flag = app.add_option("--guidance,--cfg-scale", guidance,
                                       "classifier-free guidance scale (overrides generate.guidance_scale)")
                            ->type_name("X");
  auto* height_flag = app.add_option("-H,--height", height, "output height in pixels (overrides generate.height)")
                          ->type_name("N");
  auto* width_flag = app.add_option("-W,--width", width, "output width in pixels (overrides generate.width)")
                         ->type_name("N");
  app.add_option("--set", user_sets, "override a config field: --set key.path=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--device", options.device, "compute device")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--threads", options.threads, "CPU threads per process (default: cores / ranks on node)")
      ->type_name("N")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--attention", options.attention, "attention implementation")
      ->check(CLI::IsMember({"auto", "flash", "math"}));
  app.add_option("--init-noise", options.init_noise, "safetensors file with float32 tensor `noise`")
      ->check(CLI::ExistingFile);
  app.add_option("--save-latents", options.save_latents, "write the final latents (float32 `latents`)");
  app.add_option("--pab-stats", options.pab_stats, "write the PAB summary as JSON");
  app.add_option("--cache-stats", options.cache_stats, "write the step cache's summary as JSON");
  app.add_option("--pab-analyze", options.pab_analyze, "write per-step attention change to DIR/pab.csv, DIR/pab.png");
  app.add_option("--memory-limit", options.memory_limit_gib,
                 "GiB per rank the run may use: vae.tiling auto tiles the decode beyond it, a run needing more is "
                 "refused (default: the available memory)")
      ->type_name("GIB")
      ->check(CLI::PositiveNumber);
  app.add_flag("--quiet", options.quiet, "no progress output");
  // --prompt / --negative-prompt become --set generate.prompts /
  // generate.negative_prompt (after the user's --set list, like --seed).
  std::vector<std::string> prompt_flags;
  std::string negative_flag;
  auto* prompt_opt = app.add_option("--prompt", prompt_flags, "text prompt, one output each (repeatable; "
                                                             "overrides generate.prompts)")->type_name("TEXT");
  auto* negative_opt = app.add_option("--negative-prompt", negative_flag,
                                      "CFG's negative prompt (overrides generate.negative_prompt)")->type_name("TEXT");
  std::vector<std::string> lora_flags;
  app.add_option("--lora", lora_flags, "a LoRA file, at strength SCALE (default 1); repeatable, appends to the "
                                       "config's lora list")
      ->type_name("FILE[:SCALE]")
      ->allow_extra_args(false);
  std::string prompt_file_flag;
  bool resume = false;
  auto* prompt_file_opt = app.add_option("--prompt-file", prompt_file_flag, "prompts, one per line, or .jsonl "
                                                                            "(overrides generate.prompts / "
                                                                            "generate.prompt_file)")
                              ->type_name("FILE");
  prompt_opt->excludes(prompt_file_opt);
  // --image / --last-image become generate.image / generate.last_image,
  // relative to the current folder as --prompt-file is.
  std::string image_flag, last_image_flag;
  auto* image_opt = app.add_option("--image", image_flag, "the input image of an image-to-video model, PNG or "
                                                          "JPEG (overrides generate.image)")
                        ->type_name("FILE");
  auto* last_image_opt = app.add_option("--last-image", last_image_flag,
                                        "the last frame's image of a first-last-frame model (overrides "
                                        "generate.last_image)")
                             ->type_name("FILE");
  app.add_flag("--resume", resume, "skip outputs whose files exist (sets output.skip_existing)");
  app.add_option("--text-cache", options.text_cache, "cache prompt embeddings in DIR (off by default)")
      ->type_name("DIR");
  EncodeOptions& enc = options.encode;
  CLI::App* encode = app.add_subcommand(
      "encode", "run only the tokenizer and text encoder; write ids, masks and embeddings to safetensors");
  encode->allow_extras();
  encode->add_option("--model", enc.model_dir, "model directory (or a text_encoder/ + tokenizer/ pair)")
      ->type_name("DIR")
      ->required();
  auto* enc_prompt = encode->add_option("--prompt", enc.prompts, "prompt text (repeatable)")->type_name("TEXT");
  auto* enc_file = encode->add_option("--prompt-file", enc.prompt_file, "prompts, one per line (or .jsonl)")
                       ->type_name("FILE");
  enc_prompt->excludes(enc_file);
  encode->add_option("--output", enc.output, "output safetensors file")->type_name("FILE.safetensors")->required();
  encode->add_option("--max-sequence-length", enc.max_sequence_length,
                     "tokens per prompt after padding/truncation (default: the pipeline's)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  // auto, float32, bfloat16 (float16 computes as float32 on the CPU: not offered).
  std::map<std::string, DTypeChoice> encode_dtypes;
  for (const auto& entry : kDTypeChoiceNames)
    if (entry.value != DTypeChoice::kFloat16) encode_dtypes.emplace(entry.name, entry.value);
  encode->add_option("--dtype", enc.dtype, "text encoder dtype")
      ->transform(CLI::CheckedTransformer(encode_dtypes, CLI::ignore_case));
  encode->add_flag("--ids-only", enc.ids_only, "write ids and masks only (no encoder run)");
  encode->add_option("--device", options.device, "compute device")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  encode->add_option("--threads", options.threads, "CPU threads (default: all cores)")
      ->type_name("N")
      ->check(CLI::Range(0, 1 << 16));
  encode->add_flag("--quiet", options.quiet, "no progress output");

  ConvertOptions& conv = options.convert;
  CLI::App* convert = app.add_subcommand(
      "convert", "write a model part's weights as GGUF (quantized) or safetensors");
  convert->allow_extras();
  convert->add_option("--input", conv.input, "a diffusers model folder, one part's folder, or one weights file "
                                             "(safetensors or GGUF)")
      ->type_name("DIR_OR_FILE")
      ->required();
  convert->add_option("--component", conv.component, "the part of a model folder to convert: transformer "
                                                     "(default), transformer_2, text_encoder, vae")
      ->type_name("NAME");
  convert->add_option("--type", conv.type, "output type: f32, f16, bf16 (GGUF or safetensors); q8_0, q4_0, q4_1, "
                                           "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k (GGUF)")
      ->type_name("TYPE")
      ->required();
  convert->add_option("--output", conv.output, "the file to write; its extension picks the format")
      ->type_name("FILE.gguf|FILE.safetensors")
      ->required();
  convert->add_option("--threads", options.threads, "CPU threads (default: all cores)")
      ->type_name("N")
      ->check(CLI::Range(0, 1 << 16));
  convert->add_flag("--quiet", options.quiet, "no progress output");

  std::string plan_config;
  std::vector<std::string> plan_sets;
  CLI::App* plan = app.add_subcommand(
      "plan", "check the layout and print per-rank memory and communication, without loading weights");
  plan->allow_extras();
  plan->add_option("--config", plan_config, "JSON run config")->type_name("FILE")->required();
  plan->add_option("--world-size", options.world_size, "list every valid layout of N ranks")
      ->check(CLI::Range(1, 1 << 20));
  plan->add_option("--set", plan_sets, "override a config field: --set key.path=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  plan->add_option("--memory-limit", options.memory_limit_gib,
                   "GiB per rank the run may use (default: the available memory): vae.tiling auto, the check")
      ->type_name("GIB")
      ->check(CLI::PositiveNumber);
  plan->add_option("--threads", options.threads, "CPU threads per rank the time estimate assumes")
      ->type_name("N")
      ->check(CLI::Range(0, 1 << 16));
  plan->add_option("--device", options.device, "compute device")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  plan->add_flag("--no-calibrate", options.no_calibrate,
                 "no time estimate (skips measuring this machine's rates, about a second)");

  try {
    app.parse(argc, argv);
    reject_extras(*encode, encode->remaining());
    reject_extras(*convert, convert->remaining());
    reject_extras(*plan, plan->remaining());
    reject_extras(app, app.remaining());
    if (encode->parsed()) {
      if (enc.prompts.empty() && enc.prompt_file.empty())
        throw ConfigError("encode: give --prompt TEXT (repeatable) or --prompt-file FILE");
      options.command = CliOptions::Command::encode;
      return options;
    }
    if (convert->parsed()) {
      options.command = CliOptions::Command::convert;
      return options;
    }
    if (plan->parsed()) {
      options.command = CliOptions::Command::plan;
      options.config_path = plan_config;
      user_sets.insert(user_sets.end(), plan_sets.begin(), plan_sets.end());
    } else if (options.config_path.empty()) {
      throw CLI::RequiredError("--config");
    }
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --help-all, --version
      app.exit(e, out, out);
      options.exit_now = true;
      return options;
    }
    throw ConfigError(std::string(e.what()) + " (see ditgen --help)");
  }

  Entries entries(options);
  for (const std::string& entry : user_sets) entries.add(entry, "");
  // --prompt and --prompt-file each replace both of the config's prompt sources.
  if (prompt_opt->count() > 0) {
    std::string typed;
    for (const std::string& prompt : prompt_flags)
      typed += (typed.empty() ? "--prompt " : " --prompt ") + shell_word(prompt);
    entries.add("generate.prompts=" + nlohmann::json(prompt_flags).dump(), typed);
    entries.add("generate.prompt_file=\"\"", typed);
  }
  if (prompt_file_opt->count() > 0) {
    const std::string typed = "--prompt-file " + shell_word(prompt_file_flag);
    entries.add("generate.prompts=[]", typed);
    entries.add("generate.prompt_file=" + nlohmann::json(prompt_file_flag).dump(), typed);
  }
  if (image_opt->count() > 0)
    entries.add("generate.image=" + nlohmann::json(image_flag).dump(), "--image " + shell_word(image_flag));
  if (last_image_opt->count() > 0)
    entries.add("generate.last_image=" + nlohmann::json(last_image_flag).dump(),
                "--last-image " + shell_word(last_image_flag));
  if (resume) entries.add("output.skip_existing=true", "--resume");
  for (const std::string& lora : lora_flags)
    entries.add("lora+=" + lora_flag_entry(lora).dump(), "--lora " + shell_word(lora));
  if (negative_opt->count() > 0)
    entries.add("generate.negative_prompt=" + nlohmann::json(negative_flag).dump(),
                "--negative-prompt " + shell_word(negative_flag));
  append_flag_overrides(entries, {output_flag, output, "--output"}, {seed_flag, seed, "--seed"},
                        {steps_flag, steps, "--steps"}, {frames_flag, frames, "--frames"},
                        {guidance_flag, guidance, typed_name(argc, argv, {"--guidance", "--cfg-scale"})},
                        {height_flag, height, typed_name(argc, argv, {"-H", "--height"})},
                        {width_flag, width, typed_name(argc, argv, {"-W", "--width"})});
  return options;
}

CliOptions parse_cli(int argc, char** argv) { return parse_cli(argc, argv, std::cout); }

int available_cores() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::set<std::pair<std::string, std::string>> cores;  // (package, core)
  int cpus = 0;
  bool topology = true;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++cpus;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::string package, core;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    if (package.empty() || core.empty()) topology = false;
    cores.emplace(package, core);
  }
  return std::max(1, topology ? static_cast<int>(cores.size()) : cpus);
}

int default_threads(int ranks_on_node) {
  int cores = 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cores = CPU_COUNT(&allowed);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  if (ranks_on_node < 1) ranks_on_node = 1;
  // A launcher that binds each rank (mpirun does by default) already gave
  // this process its share: use the whole mask. Otherwise share the machine.
  const int machine = static_cast<int>(std::thread::hardware_concurrency());
  if (ranks_on_node > 1 && machine > 0 && cores < machine) return cores;
  return cores / ranks_on_node > 1 ? cores / ranks_on_node : 1;
}

}  // namespace ditgen
