// The registry table: one row per diffusers class name a part's config.json
// may carry. Transformer2DModel is diffusers' legacy catch-all; its
// norm_type says which family it is, as diffusers remaps it on load
// (_CLASS_REMAPPING_DICT in diffusers/models/model_loading_utils.py:
// ada_norm_zero -> DiTTransformer2DModel, ada_norm_single ->
// PixArtTransformer2DModel).
#include "models/registry.h"

#include <algorithm>

#include "io/model_dir.h"
#include "models/autoencoder_kl.h"
#include "models/autoencoder_kl_cogvideox.h"
#include "models/autoencoder_kl_wan.h"
#include "models/cogvideox_spec.h"
#include "models/dit_spec.h"
#include "models/latte_spec.h"
#include "models/pixart_spec.h"
#include "models/t5_spec.h"
#include "models/wan_spec.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

using SpecFactory = std::unique_ptr<TransformerSpec> (*)(const nlohmann::json&, const std::string&);
using TextSpecFactory = std::unique_ptr<TextEncoderSpec> (*)(const nlohmann::json&, const std::string&);
using VaeSpecFactory = std::unique_ptr<VaeSpec> (*)(const nlohmann::json&, const std::string&);

struct Family {
  Part part;
  const char* class_name;
  const char* family;
  // Transformers: the spec factory; null = named by the contract, not built yet.
  SpecFactory spec = nullptr;
  TextSpecFactory text_spec = nullptr;  // text encoders: the spec factory
  VaeSpecFactory vae_spec = nullptr;    // VAEs: the spec factory
  // Transformers with a single-file naming of their own (the same as their
  // spec's single_file_naming), for files read without a config.
  SingleFileNaming (*file_naming)() = nullptr;
};

// clang-format off
const Family kFamilies[] = {
    {Part::kTransformer, "DiTTransformer2DModel",    "dit",    &make_spec<DitSpec>},
    {Part::kTransformer, "PixArtTransformer2DModel", "pixart", &make_spec<PixArtSpec>},
    {Part::kTransformer, "LatteTransformer3DModel",  "latte",  &make_spec<LatteSpec>},
    {Part::kTransformer, "WanTransformer3DModel",    "wan",    &make_spec<WanSpec>, nullptr, nullptr, &wan_single_file_naming},
    {Part::kTransformer, "CogVideoXTransformer3DModel", "cogvideox", &make_spec<CogVideoXSpec>},
    {Part::kVae,         "AutoencoderKL",            "vae",    nullptr, nullptr, &make_autoencoder_kl_spec},
    {Part::kVae,         "AutoencoderKLWan",         "vae",    nullptr, nullptr, &make_autoencoder_kl_wan_spec},
    {Part::kVae,         "AutoencoderKLCogVideoX",   "vae",    nullptr, nullptr, &make_autoencoder_kl_cogvideox_spec},
    {Part::kTextEncoder, "T5EncoderModel",           "t5",     nullptr, &make_t5_spec},
    {Part::kTextEncoder, "UMT5EncoderModel",         "t5",     nullptr, &make_t5_spec},
    // Whole seq2seq checkpoints: the encoder's tensors carry the same names.
    {Part::kTextEncoder, "T5ForConditionalGeneration",   "t5", nullptr, &make_t5_spec},
    {Part::kTextEncoder, "UMT5ForConditionalGeneration", "t5", nullptr, &make_t5_spec},
    {Part::kTextEncoder, "MT5EncoderModel",          "t5",     nullptr, &make_t5_spec},
};
// clang-format on

// Transformer2DModel: diffusers' legacy class, disambiguated by norm_type.
std::string legacy_transformer_class(const nlohmann::json& cfg, const std::string& path) {
  const std::string norm = io::get_string_or(cfg, "norm_type", "layer_norm", path);
  if (norm == "ada_norm_zero") return "DiTTransformer2DModel";
  if (norm == "ada_norm_single") return "PixArtTransformer2DModel";
  throw ModelError(path + ": _class_name: Transformer2DModel with norm_type '" + norm +
                   "' is no family ditgen runs (ada_norm_zero: DiT, ada_norm_single: PixArt)");
}

// A text encoder's config.json is transformers': its class is
// architectures[0] (diffusers' `_class_name` is accepted too), or, in a
// config without either, its model_type's encoder class.
std::string text_encoder_class(const nlohmann::json& cfg, const std::string& path) {
  std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  if (!cls.empty()) return cls;
  if (cfg.contains("architectures")) {
    const nlohmann::json& arch = cfg["architectures"];
    if (!arch.is_array() || arch.empty() || !arch[0].is_string())
      throw ModelError(path + ": architectures: expected a list of class names");
    return arch[0].get<std::string>();
  }
  const std::string type = io::get_string_or(cfg, "model_type", "", path);
  if (type == "t5") return "T5EncoderModel";
  if (type == "umt5") return "UMT5EncoderModel";
  if (type == "mt5") return "MT5EncoderModel";
  return type;
}

const Family& lookup(Part part, const nlohmann::json& cfg, const std::string& path) {
  std::string cls = part == Part::kTextEncoder ? text_encoder_class(cfg, path)
                                               : io::get_string_or(cfg, "_class_name", "", path);
  if (part == Part::kTransformer && cls == "Transformer2DModel") cls = legacy_transformer_class(cfg, path);
  std::string known;
  for (const Family& f : kFamilies) {
    if (f.part != part) continue;
    if (f.class_name == cls) return f;
    known += std::string(known.empty() ? "" : ", ") + f.class_name;
  }
  throw ModelError(path + (part == Part::kTextEncoder ? ": architectures: '" : ": _class_name: '") + cls + "' is not a " + part_name(part) + " class ditgen knows (" +
                   known + ")");
}

// Pipeline classes whose text rules are not PixArtAlphaPipeline's (the
// default TextPipelineRules): WanPipeline's prompt_clean, 512 tokens, zeros
// past the text seen unmasked; PixArt-Σ's 300 tokens; LattePipeline's
// mask_feature cut and fixed 120 tokens; CogVideoXPipeline's prompt as
// written, 226 tokens, an encoder without a mask (CogVideoXSpec fixes the
// length of a sin-cos model). Latte and CogVideoX unscale latents as
// 1 / scaling_factor * latents.
struct PipelineRules {
  const char* class_name;
  TextPipelineRules rules;
};

using enum PromptCleaning;
const PipelineRules kPipelines[] = {
    {"WanPipeline", {.prompt_cleaning = kUnescapeCollapseWhitespace, .default_max_length = 512,
                     .zero_padded_unmasked = true}},
    {"PixArtSigmaPipeline", {.default_max_length = 300}},
    {"LattePipeline", {.negative_cut_to_prompt = true, .fixed_max_length = 120, .divide_by_scaling_factor = false}},
    {"CogVideoXPipeline", {.divide_by_scaling_factor = false, .prompt_cleaning = kNone, .default_max_length = 226,
                           .encoder_unmasked = true}},
};

}  // namespace

TextPipelineRules pipeline_text_rules(const std::string& pipeline_class) {
  for (const PipelineRules& p : kPipelines)
    if (pipeline_class == p.class_name) return p.rules;
  return {};
}

const char* part_name(Part part) {
  switch (part) {
    case Part::kTransformer: return "transformer";
    case Part::kVae: return "vae";
    case Part::kTextEncoder: return "text_encoder";
  }
  return "?";
}

std::string family_of(Part part, const nlohmann::json& cfg, const std::string& path) {
  return lookup(part, cfg, path).family;
}

std::unique_ptr<TransformerSpec> transformer_spec(const nlohmann::json& cfg, const std::string& path) {
  const Family& f = lookup(Part::kTransformer, cfg, path);
  if (!f.spec) not_supported(std::string(f.family) + " models (" + path + ": _class_name " + f.class_name + ")");
  return f.spec(cfg, path);
}

std::optional<FileFamily> transformer_file_family(const std::vector<std::string>& names,
                                                  const std::string& gguf_architecture) {
  const auto has = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  for (const Family& f : kFamilies) {
    if (f.part != Part::kTransformer || !f.file_naming) continue;
    SingleFileNaming naming = f.file_naming();
    const io::SingleFileOptions& read = naming.read;
    const bool named = !gguf_architecture.empty() && gguf_architecture == read.architecture;
    const bool probed = !read.other_naming_probe.empty() &&
                        (has(read.other_naming_probe) || has(read.prefix + read.other_naming_probe));
    if (named || probed) return FileFamily{f.family, std::move(naming)};
  }
  return std::nullopt;
}

std::unique_ptr<VaeSpec> vae_spec(const nlohmann::json& cfg, const std::string& path) {
  const Family& f = lookup(Part::kVae, cfg, path);
  if (!f.vae_spec) not_supported(std::string(f.class_name) + " VAEs (" + path + ")");
  return f.vae_spec(cfg, path);
}

std::unique_ptr<TextEncoderSpec> text_encoder_spec(const nlohmann::json& cfg, const std::string& path) {
  const Family& f = lookup(Part::kTextEncoder, cfg, path);
  if (!f.text_spec) not_supported(std::string(f.class_name) + " text encoders (" + path + ")");
  return f.text_spec(cfg, path);
}

}  // namespace ditgen::models
