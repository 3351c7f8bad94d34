// The pipeline interface: condition -> denoise (scheduler + CFG +
// transformer) -> decode, the same for every family (docs/design.md §3). One
// pipeline per conditioning kind (class labels now, text next), shared by
// the families that condition alike; which one a model directory gets is
// decided by its transformer's family (models/registry.h), in
// pipeline/registry.cpp. Writing the results is the output writers' job
// (io/output_writer.h): pipelines hand back frames, never files.
//
// A pipeline is opened from config files alone, so every check that needs
// no weight (sizes, labels, the scheduler, PAB kinds) runs in milliseconds
// before load_weights() reads the checkpoint.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/model_dir.h"
#include "models/placement.h"
#include "models/text_encoder.h"
#include "models/transformer.h"
#include "models/vae_spec.h"
#include "pipeline/image_condition.h"
#include "pipeline/input_images.h"
#include "pipeline/vae_tiling.h"
#include "pab/broadcast.h"
#include "pab/change_recorder.h"
#include "pab/step_cache.h"
#include "parallel/communicator.h"
#include "pipeline/lora_setup.h"
#include "sched/sampler.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

// One run's outputs, as the pipeline samples them. Each output's result
// does not depend on the batch it falls into or on the layout.
struct Request {
  std::vector<int64_t> labels;        // class-conditional: one output per class id
  std::vector<std::string> prompts;   // text-conditional: one output per prompt
  std::string negative_prompt;        // text-conditional: CFG's unconditional text
  // Text-conditional, per output: its own negative prompt (a prompt file's
  // JSONL line); empty = negative_prompt for every output.
  std::vector<std::string> negative_prompts;
  // Text-conditional: a directory of cached prompt embeddings
  // (pipeline/text_cache.h); "" = no cache.
  std::string text_cache_dir;
  int64_t max_sequence_length = 0;    // text-conditional: tokens per prompt; 0 = the pipeline's default
  DTypeChoice text_encoder_dtype = DTypeChoice::kAuto;  // model.dtype (the text encoder's placement)
  std::vector<std::string> captions;  // per output: what it shows (class name, prompt); for metadata
  uint64_t seed = 0;                  // output i uses seed + i
  // Per output: its own seed (a batch: each output keeps the seed of its
  // place in the whole file, or a JSONL line's); empty = seed + i.
  std::vector<uint64_t> seeds;
  int steps = 50;
  float guidance_scale = 4.0f;
  // Two-expert models (Wan 2.2 A14B): the guidance of the low-noise expert's
  // steps (generate.guidance_scale_2, default guidance_scale). CFG runs when
  // guidance_scale > 1, as diffusers decides it.
  float guidance_scale_2 = 4.0f;
  sched::Sampler scheduler = sched::Sampler::kModelDefault;  // kModelDefault: the model's scheduler_config.json
  std::optional<double> shift;        // generate.shift: a flow sampler's flow_shift / shift
  int batch_size = 4;
  Shape latent_shape;                 // of one output, (C, h, w) or a video's (C, F, h, w); empty = the model's default
  std::optional<Tensor> init_noise;   // (outputs, ...latent_shape) instead of drawn noise
  // Image-to-video, per output: its input images, decoded
  // (pipeline/input_images.h); empty = no output has one.
  std::vector<OutputImages> images;
  pab::Schedule pab;                  // Pyramid Attention Broadcast; default off
  pab::ChangeRecorder* pab_analysis = nullptr;  // --pab-analyze: records every step's change
  // The step cache (docs/design.md §8, pab/step_cache.h): its rule, threshold
  // and (teacache) coefficients; empty = none.
  std::optional<pab::StepCacheSettings> step_cache;

  int64_t outputs() const { return static_cast<int64_t>(labels.empty() ? prompts.size() : labels.size()); }
  uint64_t seed_of(int64_t i) const {
    return seeds.empty() ? seed + static_cast<uint64_t>(i) : seeds.at(static_cast<size_t>(i));
  }
  const std::string& negative_of(int64_t i) const {
    return negative_prompts.empty() ? negative_prompt : negative_prompts.at(static_cast<size_t>(i));
  }
  // Outputs [first, first + count) as a request of their own: the same
  // settings, each output keeping its seed, negative prompt and --init-noise
  // slice, so its result is the one it has in the whole request.
  Request slice(int64_t first, int64_t count) const;
  // The outputs listed (in that order), as slice() does for a range.
  Request select(const std::vector<int64_t>& outputs) const;
};

// PAB and the step cache over a whole run (every batch's generation).
struct PabSummary {
  std::array<pab::KindStats, pab::kKinds> kinds{};
  int64_t cache_peak_bytes = 0;  // largest cache held at once, this rank
  // First-Block Cache: every batch's forwards and decisions (a decision's
  // `output` is the run's output index); empty without a step cache.
  pab::StepCacheStats step_cache;
};

struct Result {
  Tensor latents;         // (outputs, C, h, w) or (outputs, C, F, h, w) final latents, before 1/scaling_factor
  Tensor frames;          // (outputs, F, 3, H, W) in [0, 1]; F = 1 for images; output rank only
  sched::Sampler scheduler = sched::Sampler::kModelDefault;  // the sampler actually used (never kModelDefault)
  PabSummary pab;
};

// This rank's place in a parallel layout (docs/design.md §4); the default is a
// single process. Communicators must outlive the pipeline.
struct ParallelRun {
  models::ShardGroups shard;             // tp and sp groups
  parallel::Communicator* cp = nullptr;  // the CFG pair (size 2), or null
  bool output_rank = true;               // loads the VAE, decodes and writes
};

// The condition stage's result: what the transformer is conditioned on,
// one entry per output (CFG's unconditional half is the denoise stage's).
struct Conditions {
  std::vector<int64_t> class_labels;  // class-conditional: the class id of each output
  // Text-conditional: the prompt embeddings (encoded, and the encoder
  // released, before the denoising loop starts: docs/design.md §2) and how many
  // rows of each the transformer's cross-attention sees.
  Tensor prompt_embeds;                   // (N, L, D) one per output
  std::vector<int32_t> prompt_lengths;    // N
  Tensor negative_embeds;                 // (K, L, D) the distinct negative prompts (usually K = 1)
  std::vector<int32_t> negative_row;      // N: each output's row of negative_embeds; empty = row 0 for all
  std::vector<int32_t> negative_lengths;  // N: the rows each output's unconditional half sees
  // Image-to-video (pipeline/image_condition.h): each output's condition,
  // what the denoising loop joins to its latents every step; empty = none.
  std::vector<ImageCondition> images;
  int64_t outputs() const {
    return static_cast<int64_t>(class_labels.empty() ? prompt_lengths.size() : class_labels.size());
  }
  // Outputs [first, first + count): their rows (negative_embeds shared).
  Conditions slice(int64_t first, int64_t count) const;
};

// The denoiser of one step: the model and the guidance scale of its CFG.
struct StepDenoiser {
  const models::Transformer* model = nullptr;
  float guidance_scale = 1.0f;
  // Which of the model's experts this is (0: the only one, or the
  // high-noise one). A switch is told by this, not by `model`: the next
  // expert may be loaded where the last one was freed, at the same address.
  int expert = 0;
};
// Which denoiser the step at `timestep` takes (two-expert models switch
// experts at a boundary; a model may be loaded by the call).
using DenoiserForStep = std::function<StepDenoiser(double timestep)>;

// Conditions one model batch of the denoising loop: outputs [first,
// first + count), once per entry of `halves` in that order (false: the
// conditional half, true: the unconditional one). Fills args.class_labels
// or args.text / text_lengths (keeping the text tensor alive in `keep`).
using ConditionBatch = std::function<void(models::ForwardArgs& args, Tensor& keep, int64_t first, int64_t count,
                                          const std::vector<bool>& halves)>;

// Called after each denoising step: (step index 0-based, steps, batch index, batches).
using StepCallback = std::function<void(int, int, int, int)>;
// The stages around the denoising loop, for progress reports: (stage,
// done, total): ("text encoder", 0, 1) when the prompts start encoding and
// ("text encoder", 1, 1) when done; ("denoise", 0, steps) before the first
// step; ("decode", i, n) as outputs are decoded (0 before the first).
using StageCallback = std::function<void(const std::string& stage, int done, int total)>;

// model.transformer / transformer_2 / text_encoder / vae: a single weights
// file for that part instead of its folder ("" = the folder's weights).
struct ComponentFiles {
  std::string transformer;
  std::string transformer_2;
  std::string text_encoder;
  std::string vae;
  // The files a run config names.
  static ComponentFiles of(const ModelConfig& model) {
    return {model.transformer, model.transformer_2, model.text_encoder, model.vae};
  }
};

// A model directory's configs, read once: what every pipeline starts from.
struct ModelParts {
  io::ModelDir dir;
  std::unique_ptr<models::TransformerSpec> spec;  // transformer/config.json, through the registry
  std::unique_ptr<models::VaeSpec> vae;           // vae/config.json, through the registry
  nlohmann::json scheduler_config;
  sched::Sampler default_scheduler = sched::Sampler::kModelDefault;  // the one scheduler_config.json makes
  // Two-expert models (Wan 2.2 A14B: model_index.json's boundary_ratio):
  // transformer_2/config.json, the low-noise expert for timesteps below
  // boundary_timestep = boundary_ratio x num_train_timesteps; null = one
  // transformer for every step.
  std::unique_ptr<models::TransformerSpec> spec_2;
  double boundary_timestep = 0;
  ComponentFiles files;
  // The config.json each part was read from ("transformer", "transformer_2",
  // "vae"): the model folder's, or a published one (component_files.h).
  std::map<std::string, std::string> config_paths;
  // What the user is told about how the model was put together (which
  // published config a component file took), one line each.
  std::vector<std::string> notes;
  // The changes the transformers' weights take as they load (LoRA merged at
  // load: pipeline/lora_setup.h); null: none.
  std::shared_ptr<const io::WeightEdits> lora_transformer, lora_transformer_2;

  // The weights of `part` ("transformer", "transformer_2", "vae"): the
  // single file the config names for it, read as its family names such
  // files (the spec's single_file_options), else its folder; a
  // transformer's with its LoRA changes.
  io::WeightStore weights(const std::string& part) const;
  // The transformer `part` ("transformer", "transformer_2") loaded from
  // weights(part) for `shard` on `place`; then every change its LoRA
  // applies at run time must have found its linear layer
  // (check_runtime_lora_taken).
  std::unique_ptr<models::Transformer> load_transformer(const std::string& part, const models::ShardGroups& shard,
                                                        const models::Placement& place) const;
  // The config.json `part` was read from (for messages).
  const std::string& config_path(const std::string& part) const { return config_paths.at(part); }

  // Reads and cross-checks them (the VAE's latent channels against the
  // transformer's, the scheduler config by building it once, a second
  // expert's sizes against the first's). A component file must exist, be
  // safetensors or GGUF (a pickle checkpoint is refused, naming why), open
  // and hold every tensor its part reads (names and shapes; no weight is
  // read), else ModelError naming it and its config field. A part given
  // as a file whose config.json the folder lacks takes the published
  // config the file fits (component_files.h), noted in `notes`.
  static ModelParts read(const std::string& model_dir, const ComponentFiles& files = {});
};

class Pipeline {
 public:
  virtual ~Pipeline() = default;

  // The pipeline for a model directory, chosen by its transformer's family;
  // reads config files only (model_index.json, each part's config.json, the
  // scheduler config). ModelError / ConfigError ("not supported yet") naming
  // the file otherwise. OpenFor::kPlan reads no tokenizer (`plan` counts
  // the text's rows from max_sequence_length and tokenizes nothing, so it
  // runs on published config files shipped without tokenizer/); such a
  // pipeline only answers questions, it cannot generate.
  enum class OpenFor { kRun, kPlan };
  static std::unique_ptr<Pipeline> open(const std::string& model_dir, OpenFor purpose = OpenFor::kRun,
                                        const ComponentFiles& files = {});

  const io::ModelDir& model_dir() const { return parts_.dir; }
  // ModelParts::notes: what the user is told about the model's parts.
  const std::vector<std::string>& notes() const { return parts_.notes; }
  const models::TransformerSpec& transformer() const { return *parts_.spec; }
  const models::VaeSpec& vae() const { return *parts_.vae; }
  // The transformer's weights (model.transformer's file, or the folder's),
  // opened (mapped, its tensor table read), nothing loaded.
  io::WeightStore transformer_weights() const { return parts_.weights("transformer"); }
  // Two experts (Wan 2.2 A14B: model_index.json's boundary_ratio).
  bool two_experts() const { return parts_.spec_2 != nullptr; }
  // The sampler a request runs: its own, or the model's scheduler_config.json's.
  sched::Sampler sampler_of(const Request& req) const {
    return req.scheduler == sched::Sampler::kModelDefault ? parts_.default_scheduler : req.scheduler;
  }

  // The run's LoRA files (the config's lora list: pipeline/lora_setup.h)
  // read and checked against the transformers, merged into their weights
  // as they load or applied beside them: call before load_weights. What the user and the outputs'
  // metadata are told comes back.
  LoraSetup use_lora(const std::vector<LoraConfig>& loras, const LoraRules& rules, const std::string& where);

  // Stage 0, no weights: the config's generate section checked against the
  // model and turned into a Request (conditions resolved, latent shape, the
  // step count against the scheduler). ConfigError naming `where` (the config
  // file) and the field. --init-noise and PAB are added by the caller.
  virtual Request prepare(const GenerateConfig& generate, const std::string& where) const = 0;

  // Reads, validates and places the weights this rank needs: the
  // transformer (and the text encoder, when the conditions are made) on
  // `place`, the VAE on the output rank only, computing in vae_dtype
  // (model.vae_dtype resolved; float32 by default, docs/design.md §2).
  virtual void load_weights(const ParallelRun& par, const models::Placement& place,
                            DType vae_dtype = DType::kF32) = 0;

  // Stage 1: the request's conditions as the transformer takes them.
  virtual Conditions condition(const Request& req) const = 0;
  // Stage 2: the denoising loop (scheduler + CFG + transformer): the final
  // latents (outputs, ...latent_shape).
  virtual Tensor denoise(const Request& req, const Conditions& cond, const StepCallback& on_step = {},
                         PabSummary* pab = nullptr) const = 0;
  // condition + denoise.
  Tensor sample(const Request& req, const StepCallback& on_step = {}, PabSummary* pab = nullptr) const {
    return denoise(req, condition(req), on_step, pab);
  }
  // Stage 3: latents (before their normalisation is undone), (outputs, C,
  // h, w) images or (outputs, C, F', h, w) videos -> frames (outputs, F, 3,
  // H, W) in [0, 1], F = the VAE's frames_of(F'); output rank only. Each
  // video goes through the VAE seam's stream (models/vae_spec.h) in the
  // chunks its latent_chunks() says, so the decoder's memory does not grow
  // with F.
  // With set_vae_tiles, in those spatial tiles (decide_vae_tiling's grid,
  // docs/vae-tiling.md); without, whole.
  Tensor decode(const Tensor& latents, const StageCallback& on_stage = {}) const;
  void set_vae_tiles(std::optional<models::nn::TileGrid> tiles) { vae_tiles_ = std::move(tiles); }
  // condition + denoise + decode (on the output rank); writing is the
  // output writers'.
  Result generate(const Request& req, const StepCallback& on_step = {}, const StageCallback& on_stage = {}) const;
  // The text rows a run of `generate` feeds each cross-attention
  // (max_sequence_length, or the pipeline's default); 0 for class labels.
  // What `plan` counts where a text's length matters (Wan's k norms under tp).
  virtual int64_t text_tokens(const GenerateConfig&) const { return 0; }
  // What one forward of this run asks of the parallel layer: the
  // transformer's Workload for outputs of `latent` shape, with the run's
  // text length (Workload::set_text_tokens). What the layout checks and
  // `plan` use.
  parallel::Workload workload(const GenerateConfig& generate, const Shape& latent) const;
  // The condition stage's name in progress reports when it takes time (the
  // text encoder); null when it is instant (class labels).
  virtual const char* condition_stage() const { return nullptr; }
  // The text encoder the condition stage loads (and releases), or null
  // (class labels): what `plan` counts for that stage.
  virtual const models::TextEncoderSpec* text_encoder() const { return nullptr; }

 protected:
  explicit Pipeline(ModelParts parts) : parts_(std::move(parts)) {}
  Pipeline(Pipeline&&) = default;
  // Loads the VAE decoder when this is the output rank.
  void load_vae(const ParallelRun& par, Device device, DType vae_dtype);
  // The sampling settings every request takes from the generate section
  // (seed, steps, guidance, scheduler, batch size), with the step count
  // checked against the scheduler (e.g. more steps than training timesteps)
  // and guidance_scale_2 against the model (two experts only), naming
  // `where` (the config file).
  void set_sampling(Request& r, const GenerateConfig& g, const std::string& where) const;

  // The denoising loop every pipeline shares: the request's outputs in
  // batches of batch_size, each a Generation (pipeline/generation.h: its
  // noise, scheduler, CFG halves, PAB and step caches) run step by step
  // through each step's denoiser. Returns the final latents (outputs,
  // ...latent shape). `images`: each output's image-to-video condition
  // (pipeline/image_condition.h), or null.
  Tensor denoise_loop(const DenoiserForStep& denoiser, const Request& req, const Shape& one, int64_t outputs,
                      const ConditionBatch& condition_batch, const StepCallback& on_step,
                      PabSummary* pab_summary, const std::vector<ImageCondition>* images = nullptr) const;

  // How the decode stage undoes the latent scaling: diffusers' DiT and Latte
  // pipelines multiply by 1 / scaling_factor, PixArt's divides (the last
  // bit differs).
  bool divide_by_scaling_factor_ = false;

  ModelParts parts_;
  std::shared_ptr<models::VaeDecoder> vae_decoder_;
  std::optional<models::nn::TileGrid> vae_tiles_;  // empty: decode untiled
  ParallelRun par_;
};

// The VAE's placement on `device` computing in vae_dtype (model.vae_dtype
// resolved), except that float16 with force_upcast (vae/config.json,
// default true) decodes in float32.
models::Placement vae_placement(Device device, DType vae_dtype, const models::VaeSpec& vae);

// The run with the model's own defaults (TransformerSpec::run_defaults:
// steps, guidance_scale, output.fps) in the settings it did not set itself
// (config/config.h given_key); what it set, and ditgen's defaults where the
// model has none, stay.
RunConfig with_model_defaults(RunConfig config, const models::TransformerSpec& model);

}  // namespace ditgen::pipeline
