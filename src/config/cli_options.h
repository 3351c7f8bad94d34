// The command line of docs/design.md §1, parsed with CLI11 into plain options.
// It lives in the config layer (not src/cli/) so it is unit-tested with the
// config it feeds. Parsing checks the form of arguments (names in their
// allowed sets, integers in range, --init-noise an existing file); whether
// this build and machine can run a value (--device cuda, --attention flash,
// a half-precision model.dtype) is decided later by choose_device
// (config/device_choice.h), and --world-size's layouts by the plan command.
// --prompt, --prompt-file, --negative-prompt, --frames, --image,
// --last-image and --resume are --set entries too (generate.prompts,
// generate.prompt_file, generate.negative_prompt, generate.frames,
// generate.image, generate.last_image, output.skip_existing), and so
// are the shorthands --guidance (alias --cfg-scale), -H/--height and
// -W/--width (generate.guidance_scale, generate.height, generate.width);
// each --lora FILE[:SCALE] is a `lora+={"path": FILE, "scale": SCALE}`
// entry, appending to the config's lora list.
// Each entry remembers what the user typed for it, so a message about its
// value names the flag (`--prompt ""`), not the --set it became.
//
// An option ditgen does not have is one line naming it, with a did-you-mean
// from ditgen's own options and from the names other tools use
// (config/foreign_names.h: --cfg -> --guidance, -p -> --prompt).
//
// --output/--seed/--steps become --set entries appended after the user's own
// --set list, so one precedence rule holds for every field:
// config file < --set < dedicated flag.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "vocab/dtype_choice.h"

namespace ditgen {

// `ditgen encode` (docs/design.md §1).
struct EncodeOptions {
  std::string model_dir;
  std::vector<std::string> prompts;  // --prompt, in order
  std::string prompt_file;           // or --prompt-file
  std::string output;                // FILE.safetensors
  int max_sequence_length = 0;       // 0 = the pipeline's default
  DTypeChoice dtype = DTypeChoice::kAuto;  // auto | float32 | bfloat16
  bool ids_only = false;
};

// `ditgen convert` (docs/design.md §1): the values as typed; the command
// checks them (the type against the quantizers, the component against the
// model's parts).
struct ConvertOptions {
  std::string input;                     // a model folder, a part's folder or one weights file
  std::string component = "transformer";
  std::string type;                      // f32 | f16 | bf16 | q8_0 | ... | q6_k
  std::string output;                    // FILE.gguf | FILE.safetensors
};

struct CliOptions {
  enum class Command { generate, plan, encode, convert };
  Command command = Command::generate;

  // --help or --version was printed: main exits 0 without running.
  bool exit_now = false;

  std::string config_path;
  std::vector<std::string> set_overrides;  // "key.path=value", in application order
  // Per entry of set_overrides: what the user typed for it ("--output x.png");
  // "" for a --set entry itself. For load_config's messages.
  std::vector<std::string> override_origins;
  std::string device = "auto";             // auto | cpu | cuda
  int threads = 0;                         // 0 = default_threads(ranks on this node)
  std::string attention = "auto";          // auto | flash | math
  std::string init_noise;                  // "" = draw the noise
  std::string save_latents;                // "" = do not save
  std::string pab_stats;                   // "" = no JSON summary
  std::string pab_analyze;                 // "" = no analysis directory
  std::string cache_stats;                 // "" = no step cache JSON summary
  bool quiet = false;
  std::string text_cache;                  // --text-cache DIR: prompt embedding cache; "" = off
  double memory_limit_gib = 0;             // --memory-limit: GiB per rank the run may use; 0 = available memory
  int world_size = 0;                      // plan: 0 = only the config's own layout
  bool no_calibrate = false;               // plan --no-calibrate: no time estimate (no rate measured)
  EncodeOptions encode;
  ConvertOptions convert;
};

// Throws ConfigError (exit 2) with CLI11's message on a bad command line.
// Help and version text go to `out`.
CliOptions parse_cli(int argc, const char* const* argv, std::ostream& out);
CliOptions parse_cli(int argc, char** argv);

// CPU threads per process when --threads is not given: the cores this process
// may run on (its affinity mask, which respects taskset and cgroup cpusets)
// divided among the ranks on this node, at least 1.
int default_threads(int ranks_on_node);

// The physical cores this process may run on (its affinity mask, hyper-
// threads of one core counted once; the CPU count where the topology is
// not readable): how many ranks `mpirun` starts here without
// --oversubscribe (Open MPI's default slots are the cores).
int available_cores();

}  // namespace ditgen
