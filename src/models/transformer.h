// The model-family seam: what every transformer family answers from its
// config.json alone (TransformerSpec: sizes, conditioning, attention kinds,
// the parallel Workload, size checks) and the denoiser a pipeline calls
// (Transformer: one forward pass). A family is a model file implementing
// both plus one entry in the registry (models/registry.cpp); the CLI, `plan`,
// the preflight checks, the PAB setup and the pipelines speak only to these
// interfaces, never to a family's own config struct.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/placement.h"
#include "models/shard_groups.h"
#include "models/vae_spec.h"
#include "pab/broadcast.h"
#include "pab/step_cache.h"
#include "parallel/communicator.h"
#include "parallel/layout.h"
#include "parallel/patch_pipeline.h"
#include "parallel/sequence_attention.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace ditgen::models {

// How a family is conditioned; pipelines are chosen by it (one pipeline per
// conditioning kind, shared by the families that condition alike).
enum class Conditioning { kClassLabels, kText };

// One forward pass. Latents and the result are host float32 whatever the
// model's placement, so pipelines and schedulers stay on the CPU.
struct ForwardArgs {
  const Tensor* latents = nullptr;      // (B, C, h, w) images; (B, C, F, h, w) videos
  std::vector<float> timesteps;         // B
  std::vector<int64_t> class_labels;    // B, class-conditional families (num_classes = the null class)
  // Text-conditional families: the prompt embeddings (the text encoder's
  // output, before the model's caption projection) and, per sample, how
  // many of their first rows the cross-attention sees (TextPipelineRules:
  // PixArt the text's mask count, the rest masked padding; Latte
  // the prompt's token count k, for its negative too, as diffusers' cut to
  // k rows; Wan L, its zero rows seen unmasked; empty = all L rows).
  const Tensor* text = nullptr;         // (B, L, caption_channels) host float32
  std::vector<int32_t> text_lengths;    // B, each in [1, L]; or empty
  // Image-conditioned Wan (image_dim in its config): the image encoder's
  // tokens, a second context beside the text (every rank holds them whole).
  const Tensor* image = nullptr;        // (B, M, image_dim) host float32: M = 257, or 514 first-last-frame
  // Wan 2.2 TI2V (expand_timesteps): a timestep per token, 0 on the clean
  // first latent frame's, for the modulation in place of `timesteps`.
  std::vector<float> token_timesteps;   // B * tokens, each sample's in the model's token order; or empty
  // PixArt's micro-conditions (micro_conditions() models only): per sample
  // the image's (height, width) in pixels and height / width.
  std::vector<std::array<float, 2>> resolution;  // B
  std::vector<float> aspect_ratio;               // B
  pab::BroadcastCache* pab = nullptr;   // Pyramid Attention Broadcast, or null
  // The step cache (docs/design.md §8), or null; the pipeline began its batch
  // and step. Stage::run applies it whatever the family.
  pab::StepCache* step_cache = nullptr;
  // PipeFusion (pp > 1): this generation's step and the keys and values
  // kept from earlier steps; null = every step synchronous.
  parallel::StaleKeyValues* stale_kv = nullptr;
};

// How a text pipeline cleans a prompt before its tokenizer sees it.
enum class PromptCleaning {
  // PixArt / Latte with clean_caption=False: Python's text.lower().strip().
  kLowerStrip,
  // WanPipeline's prompt_clean as diffusers runs it without ftfy:
  // html.unescape twice, str.strip(), every run of the `regex` module's \s
  // to one space, str.strip(); no lower-casing (docs/text-wan.md).
  kUnescapeCollapseWhitespace,
  // CogVideoXPipeline: the prompt as written.
  kNone,
};

// Where a text-conditional family's diffusers pipeline differs from
// another's: how it feeds the encoded texts (each tokenized and encoded at
// max_length rows) to the cross-attention, and how it unscales latents.
// The first four fields are the denoiser's side (each family's spec says
// them); the last four are the text stage's, which the text stage takes
// from the pipeline class model_index.json names
// (models::pipeline_text_rules, models/registry.h), so `ditgen encode`
// applies them without building a transformer.
struct TextPipelineRules {
  // false (PixArtAlphaPipeline): each text's own real tokens, its padding
  // masked: the prompt's mask count, the negative's mask count for CFG's
  // unconditional half. true (LattePipeline's mask_feature): the prompt's
  // k real tokens, and the negative's first k rows (its EOS and padding
  // rows, unmasked) for the unconditional half.
  bool negative_cut_to_prompt = false;
  // The tokenizer length when it is not the run's to choose: LattePipeline
  // has no max_sequence_length (120, hard-coded); a CogVideoX model with
  // sin-cos positions takes its table's text rows (max_text_seq_length).
  // 0 = configurable (generate.max_sequence_length, default from
  // model_index.json).
  int64_t fixed_max_length = 0;
  // Where a fixed length comes from when the model fixes it: the key of
  // transformer/config.json ("max_text_seq_length"); null = the pipeline
  // (Latte's). Named in the error for another max_sequence_length.
  const char* fixed_max_length_key = nullptr;
  // Decode: latents / scaling_factor (PixArt) or 1 / scaling_factor *
  // latents (Latte, DiT); the last bit differs.
  bool divide_by_scaling_factor = true;
  // The prompt (and negative prompt) cleaning before tokenizing.
  PromptCleaning prompt_cleaning = PromptCleaning::kLowerStrip;
  // generate.max_sequence_length's default: the pipeline call's
  // (PixArt-Σ 300, WanPipeline 512); 0 = 120 (PixArt-α's, Latte's).
  int64_t default_max_length = 0;
  // true (WanPipeline): each text's embeddings are its own tokens' rows
  // (pieces + EOS) followed by exact zeros up to max_length, and the
  // cross-attention sees all max_length rows unmasked, for the prompt and
  // the negative prompt alike. false: the encoder's rows, with the
  // padding masked or cut as negative_cut_to_prompt says.
  bool zero_padded_unmasked = false;
  // true (CogVideoXPipeline): the text encoder runs without an attention
  // mask (its padding tokens attend and are attended to), and the denoiser
  // sees all max_length rows of each text, unmasked.
  bool encoder_unmasked = false;
};

// What a family's diffusers pipeline call takes when the run does not say
// (WanPipeline: 50 steps, guidance 5.0, and the 16 fps its examples export
// MP4s at); an empty field keeps ditgen's own default (config/config.h).
// The image size and frame count are latent_shape's (0 = the model's).
struct RunDefaults {
  std::optional<int> steps;
  std::optional<double> guidance_scale;
  std::optional<double> fps;
};

class Transformer {
 public:
  virtual ~Transformer() = default;
  // (B, out_channels, ...) host float32 on every rank of the shard.
  virtual Tensor forward(const ForwardArgs& args) const = 0;
};

// What names a family and how it is driven: its registry name, its
// conditioning (which pipeline runs it) and the PAB kinds its blocks have.
struct FamilyTraits {
  const char* family;  // "dit"
  Conditioning conditioning;
  std::vector<pab::Kind> pab_kinds;  // kMlp: a feed-forward per block
};

// How single files of a family's transformer name their tensors, both
// ways: `read` opens one (io::SingleFileOptions: the prefix ComfyUI's
// checkpoints carry, "model.diffusion_model.", the GGUF architecture, the
// original release's naming), `file_name` names one of the model's tensors
// as such a file does, for writing one (`ditgen convert`; nullopt for a
// tensor that naming lacks; unset: the model's own names). A family's
// naming depends on the family alone, never on its config, so a file is
// read without its config.json too (models/registry.h).
struct SingleFileNaming {
  io::SingleFileOptions read;
  std::function<std::optional<std::string>(const std::string&)> file_name;
};

// Diffusers' names, with or without the "model.diffusion_model." prefix.
inline SingleFileNaming diffusers_single_file_naming() {
  SingleFileNaming naming;
  naming.read.prefix = "model.diffusion_model.";
  return naming;
}

class TransformerSpec {
 public:
  explicit TransformerSpec(FamilyTraits traits) : traits_(std::move(traits)) {}
  virtual ~TransformerSpec() = default;

  const char* family() const { return traits_.family; }
  Conditioning conditioning() const { return traits_.conditioning; }
  // Which PAB kinds exist in this model.
  bool has_pab_kind(pab::Kind kind) const {
    return std::find(traits_.pab_kinds.begin(), traits_.pab_kinds.end(), kind) != traits_.pab_kinds.end();
  }
  virtual int64_t num_layers() const = 0;
  virtual int64_t head_dim() const = 0;
  virtual int64_t in_channels() const = 0;      // latent (and eps) channels
  virtual int64_t out_channels() const = 0;     // 2 * in_channels with learned sigma
  virtual int64_t num_classes() const { return 0; }  // class-conditional families
  // Text-conditional families: the width of the embeddings the model reads
  // (config caption_channels: the text encoder's hidden size).
  virtual int64_t caption_channels() const { return 0; }
  // Whether forward needs ForwardArgs::resolution / aspect_ratio (PixArt's
  // 1024 models: use_additional_conditions).
  virtual bool micro_conditions() const { return false; }
  // Text-conditional families: their pipeline's rules (PixArt's by default).
  virtual TextPipelineRules text_pipeline_rules() const { return {}; }
  // A step cache under CFG (pab/step_cache.h): false when the family's
  // diffusers pipeline runs both halves in one forward under one cache
  // context (the halves decide together); true when it calls the
  // transformer once per half in separate contexts (WanPipeline's "cond"
  // and "uncond": each half keeps its own state and decides alone).
  virtual bool cfg_halves_cached_apart() const { return false; }
  // TeaCache's published rescaling coefficients (highest power first) where
  // its authors calibrated them on this model, matched by its sizes
  // (docs/step-caches.md cites each); empty: a teacache config must give
  // cache.coefficients.
  virtual std::vector<double> teacache_coefficients() const { return {}; }
  // The sampling and output settings a run leaves unset take these.
  virtual RunDefaults run_defaults() const { return {}; }
  // How a single file of this transformer's weights (model.transformer:
  // safetensors or GGUF, as people download them) names its tensors beyond
  // diffusers' names, both ways (SingleFileNaming). Default: diffusers'
  // names, with or without ComfyUI's prefix.
  virtual SingleFileNaming single_file_naming() const { return diffusers_single_file_naming(); }
  // Reading one: single_file_naming().read.
  io::SingleFileOptions single_file_options() const { return single_file_naming().read; }
  // Checks every tensor of the whole model (every layer) against `weights`
  // (name, shape, floating type), reading none: ModelError naming the file
  // and the first tensor that does not fit. What tells which published
  // config a file without one is (pipeline/component_files.h).
  virtual void check_weights(const io::WeightStore& weights) const = 0;

  // The latent shape of one output for a requested image of height x width
  // pixels and `frames` frames (each 0 = the model's default) and a VAE of
  // these factors (models/vae_spec.h: pixels per latent, frames per latent
  // frame): (C, h, w) for image families, which take no frame count, (C, F',
  // h, w) for video families (F' latent frames: F with an image VAE, which
  // decodes frame by frame; (F - 1) / 4 + 1 with Wan's causal one).
  // ConfigError for a size the model cannot make, naming `where` (the config
  // file and section, "run.json: generate") and the field (".height/width",
  // ".frames").
  virtual Shape latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                             const std::string& where) const = 0;
  // What one forward asks of the parallel layer for outputs of that shape:
  // attention sizes for the layout checks, element counts for `plan`.
  virtual parallel::Workload workload(const Shape& latent) const = 0;

  // Validates every weight's name and shape against the config, then loads
  // this rank's part onto `place`.
  virtual std::unique_ptr<Transformer> load(const io::WeightStore& weights, const ShardGroups& shard,
                                            const Placement& place) const = 0;

 private:
  FamilyTraits traits_;
};

// Image families' latent_shape: generate.frames is for video models.
inline void reject_frames(int64_t frames, const char* family, const std::string& where) {
  if (frames != 0)
    throw ConfigError(where + ".frames: " + std::to_string(frames) + ": a " + family +
                      " model makes images; frames is for video models (leave it unset)");
}

}  // namespace ditgen::models
