// The run configuration of docs/design.md §2 as plain structs, and the functions
// that load, check and write it back.
//
// Loading is one pipeline over the JSON document, so every check sees the
// same data the run will use:
//   read file (duplicate keys rejected) -> apply --set overrides in order
//   -> reject unknown keys (with a did-you-mean) -> typed reads with range
//   checks and defaults -> cross-field rules.
// Every error is a ConfigError (exit 2) whose message starts with the config
// file and the dotted path at fault, and says which --set produced the value
// when one did.
//
// Enumerated settings are enums with their names in one table
// (config/enum_names.h, sched/sampler.h), parsed once here.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/enum_names.h"
#include "vocab/sp_mode.h"
#include "sched/sampler.h"
#include "vocab/cache_kind.h"
#include "vocab/dtype_choice.h"

namespace ditgen {

// A class id, or a class name looked up in model_index.json's id2label.
using ClassLabel = std::variant<int, std::string>;

struct ModelConfig {
  std::string path;            // diffusers-layout directory, as written
  // Where the model comes from (a Hub id or URL): informational, quoted by
  // the error for a model that is not there yet. "" = not said.
  std::string source;
  DTypeChoice dtype = DTypeChoice::kAuto;          // the transformer's and the text encoder's
  DTypeChoice vae_dtype = DTypeChoice::kFloat32;   // the VAE decoder's (no auto)
  // Component files (docs/quantized.md): one file for a part of the model,
  // safetensors or GGUF, in diffusers' tensor names or the original
  // release's / ComfyUI's; "" = the part from `path`. The tokenizer and
  // scheduler always come from `path`, and each part's config.json from
  // there or, where `path` has none, from the published configs
  // (pipeline/component_files.h).
  std::string transformer;
  std::string transformer_2;
  std::string text_encoder;
  std::string vae;
  // W8A8 int8 GEMM weights for the transformer blocks, made at load (CPU).
  Quantize quantize = Quantize::kNone;
  bool operator==(const ModelConfig&) const = default;
};

struct GenerateConfig {
  std::vector<ClassLabel> class_labels;  // class-conditional models
  std::vector<std::string> prompts;      // text-conditional models
  std::string negative_prompt;
  bool negative_prompt_given = false;  // the key was there (even as ""): class-label models refuse it
  std::string prompt_file;       // text or .jsonl prompt file (config/prompt_file.h); excludes prompts
  // Image-to-video (docs/image-to-video.md): the input image and, for
  // first-last-frame models, the last frame's, PNG or JPEG; "" = none (a
  // JSONL prompt file's lines may name their own). Which models take them
  // is the model's to say (pipeline/video_task.h).
  std::string image;
  std::string last_image;
  int max_sequence_length = 0;   // text tokens per prompt; 0 = the pipeline's default
  std::uint64_t seed = 0;        // output i uses seed + i
  int steps = 50;
  double guidance_scale = 4.0;   // CFG is on when > 1 (as diffusers)
  sched::Sampler scheduler = sched::Sampler::kModelDefault;  // kModelDefault: the model's scheduler config
  std::optional<double> shift;   // flow samplers: overrides flow_shift / shift
  // Two-expert models (Wan 2.2 A14B): the low-noise expert's guidance; empty = guidance_scale.
  std::optional<double> guidance_scale_2;
  int batch_size = 4;            // outputs per forward pass
  int frames = 0;                // 0 = the model's default
  int height = 0;                // 0 = sample_size x VAE factor
  int width = 0;

  // One output per class label or prompt.
  int num_outputs() const {
    return static_cast<int>(class_labels.empty() ? prompts.size() : class_labels.size());
  }
  bool operator==(const GenerateConfig&) const = default;
};

struct ParallelConfig {
  int sp = 1;
  int cp = 1;
  int tp = 1;
  // auto (dsp for video models with a separate temporal attention, else
  // ulysses) | ulysses | ring | dsp | naive_patch (vocab/sp_mode.h)
  parallel::SpMode sp_mode = parallel::SpMode::kAuto;
  // PipeFusion (parallel/layout.h, Layout::pp): pipeline stages, the patches
  // the tokens travel them in (0 = pp), and the synchronous steps first.
  int pp = 1;
  int patches = 0;
  int warmup_steps = 1;
  // Per-rank shares for machines of mixed capacity (parallel/layout.h):
  // one integer weight per sp rank (ring, dsp) or, with pp > 1, per stage.
  std::vector<int64_t> sp_weights = {};

  int world_size() const { return pp * sp * cp * tp; }
  bool operator==(const ParallelConfig&) const = default;
};

// One PAB attention kind (§5): recomputed every `range` steps while
// threshold[0] < t < threshold[1].
struct PabKindConfig {
  int range = 0;
  std::array<double, 2> threshold{};
  std::vector<int> blocks;  // mlp only: the blocks whose MLP output is broadcast
  bool operator==(const PabKindConfig&) const = default;
};

// Absent kinds are off; everything absent means PAB off.
struct PabConfig {
  std::optional<PabKindConfig> spatial;
  std::optional<PabKindConfig> temporal;
  std::optional<PabKindConfig> cross;
  std::optional<PabKindConfig> mlp;

  bool enabled() const { return spatial || temporal || cross || mlp; }
  bool operator==(const PabConfig&) const = default;
};

// A step cache (docs/design.md §8, docs/step-caches.md): skips the rest of a
// forward when the first block says the step changed little. Its kinds:
// vocab/cache_kind.h.

// TeaCache's rescaling polynomial: numpy.poly1d's coefficients, highest
// power first (its reference code's degree 4).
inline constexpr std::size_t kTeaCacheCoefficients = 5;

// Absent section = no cache.
struct CacheConfig {
  std::optional<CacheKind> kind;  // empty: off
  double threshold = 0;           // > 0
  std::vector<double> coefficients;  // teacache: kTeaCacheCoefficients, or empty = the family's published ones

  bool enabled() const { return kind.has_value(); }
  bool operator==(const CacheConfig&) const = default;
};

struct OutputConfig {
  std::string path;             // pattern: see io/output_paths.h
  OutputFormat format = OutputFormat::kPng;
  double fps = 8.0;             // mp4 only (given with png: an error)
  int crf = 18;                 // mp4 only: x264's constant rate factor, 0 (lossless) .. 51
  bool grid = false;            // also write a labelled contact sheet
  bool skip_existing = false;   // outputs whose files all exist are not generated again (--resume)
  bool operator==(const OutputConfig&) const = default;
};

// One entry of the `lora` list (docs/lora.md): a LoRA file, its strength
// and the transformer it changes. A relative path in a config file names a
// place beside that file; --lora's beside the current folder.
struct LoraConfig {
  std::string path;
  double scale = 1.0;
  // diffusers' loader's default; keys a file writes under transformer_2.
  // go to the second expert whatever this says.
  LoraTargetChoice target = LoraTargetChoice::kTransformer;
  bool operator==(const LoraConfig&) const = default;
};

// The top-level vae section (docs/vae-tiling.md): diffusers' enable_tiling
// names, in pixels; 0 = the VAE's own default (models::VaeSpec's
// default_tile_sizes). Each given size is a positive integer and a given
// stride at most its side's given min; what needs the VAE (multiples of its
// spatial factor, against its defaults) is checked where the VAE is known
// (pipeline/vae_tiling.h).
struct VaeConfig {
  VaeTiling tiling = VaeTiling::kAuto;  // auto: tile when the untiled decode would exceed the memory limit
  int tile_sample_min_height = 0, tile_sample_min_width = 0;
  int tile_sample_stride_height = 0, tile_sample_stride_width = 0;
  bool operator==(const VaeConfig&) const = default;
};

struct RunConfig {
  ModelConfig model;
  std::vector<LoraConfig> lora;  // applied in this order, each change added to the weights
  bool lora_strict = true;       // a key that matches no tensor of the model: exit 2 (else a warning)
  // Merged at load or applied beside the weights at run time; none: merged
  // into float weights, beside GGUF block-quantized ones (docs/lora.md).
  std::optional<LoraApply> lora_apply;
  GenerateConfig generate;
  ParallelConfig parallel;
  PabConfig pab;
  CacheConfig cache;
  OutputConfig output;
  VaeConfig vae;

  // Where the settings came from, for messages and PNG metadata.
  std::string source_file;              // the config path as given
  nlohmann::json source_json;           // the file as read, before overrides
  std::vector<std::string> overrides;   // the --set entries applied, in order
  // What the command line's values changed beyond their own fields, one
  // line each (config/command_line_rules.h), for the user to read.
  std::vector<std::string> notes;
  // The file with the overrides applied, before any default: which keys the
  // run set itself (the model's own defaults fill the others, given_key).
  nlohmann::json document;
};

// Whether the run set section.key itself (in its file or by --set), so a
// model's default (pipeline::with_model_defaults) must not replace it.
bool given_key(const RunConfig& config, const std::string& section, const std::string& key);

// Reads, overrides, validates. set_overrides are "key.path=value" strings,
// applied in order (later wins); a value is parsed as JSON when it parses
// (numbers, true/false, arrays, "quoted"), else taken as a plain string.
// override_origins[i], when given and not empty, is what the user typed
// for set_overrides[i] (`--prompt ""`, `--output x.png`), for messages;
// otherwise "--set <entry>". Throws ConfigError.
RunConfig load_config(const std::string& path, const std::vector<std::string>& set_overrides,
                      const std::vector<std::string>& override_origins = {});

// The effective config (after overrides and defaults) as JSON, loadable again
// by load_config. Settings left at "unset" (no prompts, frames 0, scheduler "",
// PAB kinds off) are omitted.
nlohmann::json to_json(const RunConfig& config);

}  // namespace ditgen
