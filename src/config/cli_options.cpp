// See cli_options.h. CLI11 builds the parser; --seed, --steps and --frames are taken as
// text and checked here, because CLI11 (2.1) reads integers with strtoull
// base 0, which accepts "-1" (as 2^64-1) and reads "010" as octal.
#include "config/cli_options.h"

#include <sched.h>

#include <charconv>
#include <cstdint>
#include <iostream>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

// The --set entries of the dedicated flags, after the user's --set list.
void append_flag_overrides(CliOptions& options, const CLI::Option* output_flag, const std::string& output,
                           const CLI::Option* seed_flag, const std::string& seed,
                           const CLI::Option* steps_flag, const std::string& steps,
                           const CLI::Option* frames_flag, const std::string& frames) {
  if (output_flag->count() > 0)  // quoted as JSON: "true" or "123" stay paths
    options.set_overrides.push_back("output.path=" + nlohmann::json(output).dump());
  if (seed_flag->count() > 0) {
    std::uint64_t value = 0;
    if (!parse_decimal(seed, value))
      throw ConfigError("--seed: expected a non-negative integer, got \"" + seed + "\"");
    options.set_overrides.push_back("generate.seed=" + std::to_string(value));
  }
  if (steps_flag->count() > 0) {
    int value = 0;
    if (!parse_decimal(steps, value) || value < 1)
      throw ConfigError("--steps: expected a positive integer, got \"" + steps + "\"");
    options.set_overrides.push_back("generate.steps=" + std::to_string(value));
  }
  if (frames_flag->count() > 0) {
    int value = 0;
    if (!parse_decimal(frames, value) || value < 1)
      throw ConfigError("--frames: expected a positive integer, got \"" + frames + "\"");
    options.set_overrides.push_back("generate.frames=" + std::to_string(value));
  }
}

}  // namespace

CliOptions parse_cli(int argc, const char* const* argv, std::ostream& out) {
  CliOptions options;
  CLI::App app{"ditgen: image and video generation with Diffusion Transformers", "ditgen"};
  app.set_version_flag("--version", std::string("ditgen ") + kDitgenVersion);
  app.require_subcommand(0, 1);

  std::string output, seed, steps, frames;
  std::vector<std::string> user_sets;
  app.add_option("--config", options.config_path, "JSON run config (required)")->type_name("FILE");
  auto* output_flag = app.add_option("--output", output, "output path (overrides output.path)")->type_name("PATH");
  auto* seed_flag = app.add_option("--seed", seed, "base seed; output i uses seed + i (overrides generate.seed)")
                        ->type_name("N");
  auto* steps_flag = app.add_option("--steps", steps, "denoising steps (overrides generate.steps)")->type_name("N");
  auto* frames_flag = app.add_option("--frames", frames, "video frames per output (video models; overrides "
                                                         "generate.frames)")->type_name("N");
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
  app.add_flag("--quiet", options.quiet, "no progress output");
  // --prompt / --negative-prompt become --set generate.prompts /
  // generate.negative_prompt (after the user's --set list, like --seed).
  std::vector<std::string> prompt_flags;
  std::string negative_flag;
  auto* prompt_opt = app.add_option("--prompt", prompt_flags, "text prompt, one output each (repeatable; "
                                                             "overrides generate.prompts)")->type_name("TEXT");
  auto* negative_opt = app.add_option("--negative-prompt", negative_flag,
                                      "CFG's negative prompt (overrides generate.negative_prompt)")->type_name("TEXT");
  std::string prompt_file_flag;
  bool resume = false;
  auto* prompt_file_opt = app.add_option("--prompt-file", prompt_file_flag, "prompts, one per line, or .jsonl "
                                                                            "(overrides generate.prompts / "
                                                                            "generate.prompt_file)")
                              ->type_name("FILE");
  prompt_opt->excludes(prompt_file_opt);
  app.add_flag("--resume", resume, "skip outputs whose files exist (sets output.skip_existing)");
  app.add_option("--text-cache", options.text_cache, "cache prompt embeddings in DIR (off by default)")
      ->type_name("DIR");
  EncodeOptions& enc = options.encode;
  CLI::App* encode = app.add_subcommand(
      "encode", "run only the tokenizer and text encoder; write ids, masks and embeddings to safetensors");
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

  std::string plan_config;
  std::vector<std::string> plan_sets;
  CLI::App* plan = app.add_subcommand(
      "plan", "check the layout and print per-rank memory and communication, without loading weights");
  plan->add_option("--config", plan_config, "JSON run config")->type_name("FILE")->required();
  plan->add_option("--world-size", options.world_size, "list every valid layout of N ranks")
      ->check(CLI::Range(1, 1 << 20));
  plan->add_option("--set", plan_sets, "override a config field: --set key.path=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);

  try {
    app.parse(argc, argv);
    if (encode->parsed()) {
      if (enc.prompts.empty() && enc.prompt_file.empty())
        throw ConfigError("encode: give --prompt TEXT (repeatable) or --prompt-file FILE");
      options.command = CliOptions::Command::encode;
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

  options.set_overrides = user_sets;
  // --prompt and --prompt-file each replace both of the config's prompt sources.
  if (prompt_opt->count() > 0) {
    options.set_overrides.push_back("generate.prompts=" + nlohmann::json(prompt_flags).dump());
    options.set_overrides.push_back("generate.prompt_file=\"\"");
  }
  if (prompt_file_opt->count() > 0) {
    options.set_overrides.push_back("generate.prompts=[]");
    options.set_overrides.push_back("generate.prompt_file=" + nlohmann::json(prompt_file_flag).dump());
  }
  if (resume) options.set_overrides.push_back("output.skip_existing=true");
  if (negative_opt->count() > 0)
    options.set_overrides.push_back("generate.negative_prompt=" + nlohmann::json(negative_flag).dump());
  append_flag_overrides(options, output_flag, output, seed_flag, seed, steps_flag, steps, frames_flag, frames);
  return options;
}

CliOptions parse_cli(int argc, char** argv) { return parse_cli(argc, argv, std::cout); }

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
