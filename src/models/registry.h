// The model-family registry: each part of a diffusers directory
// (transformer, vae, text encoder) names its class in config.json's
// `_class_name`; the registry maps that name (and the legacy names diffusers
// still loads, such as `Transformer2DModel` + `norm_type`) to a family, and
// a transformer family to the spec that parses its config once. Families
// that the contract names but this version does not build yet are listed
// too, so a user gets "not supported yet: <family>" (exit 2) rather than
// "unknown class". Adding a family: a model file, a pipeline (or reuse of
// one), one entry in registry.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/text_encoder.h"
#include "models/transformer.h"
#include "models/vae_spec.h"

namespace ditgen::models {

enum class Part { kTransformer, kVae, kTextEncoder };
const char* part_name(Part part);  // "transformer", "vae", "text_encoder"

// The family of a part from its parsed config.json at `path`: "dit",
// "pixart", "latte", "vae", "t5". ModelError naming the file and
// `_class_name` for a class no family takes (listing those that exist).
std::string family_of(Part part, const nlohmann::json& config, const std::string& path);

// The spec of a transformer/config.json, parsed once. ModelError for an
// unknown or malformed config; ConfigError "not supported yet" for a family
// the contract names that this version does not run.
std::unique_ptr<TransformerSpec> transformer_spec(const nlohmann::json& config, const std::string& path);

// The spec of a vae/config.json (the VAE seam, models/vae_spec.h), parsed
// once; the same errors as above.
std::unique_ptr<VaeSpec> vae_spec(const nlohmann::json& config, const std::string& path);

// The spec of a text_encoder/config.json (transformers' format: the class is
// `architectures[0]`, or the model_type's encoder), parsed once; the same
// errors as above.
std::unique_ptr<TextEncoderSpec> text_encoder_spec(const nlohmann::json& config, const std::string& path);

// A transformer's single file read without its config.json (`ditgen
// convert` of a lone file): the family whose own naming it uses (its
// single_file_naming), told by the file's GGUF general.architecture
// (`gguf_architecture`, "" for none) or by that naming's probe tensor among
// `names` (with or without the naming's prefix); nullopt when neither names
// one (diffusers' names: the family is not told by the file).
struct FileFamily {
  std::string family;  // "wan"
  SingleFileNaming naming;
};
std::optional<FileFamily> transformer_file_family(const std::vector<std::string>& names,
                                                  const std::string& gguf_architecture);

// The text-side rules of a diffusers pipeline class (model_index.json's
// _class_name; "" for a bare text_encoder/ + tokenizer/ pair), from the
// table in registry.cpp:
//   WanPipeline:         WanPipeline's prompt_clean (without ftfy),
//                        max_sequence_length 512, embeddings zero past the
//                        text's tokens and seen unmasked.
//   PixArtSigmaPipeline: lower().strip(), 300.
//   LattePipeline:       lower().strip(), always 120, the negative cut to
//                        the prompt's token count (LatteSpec's rules).
//   CogVideoXPipeline:   the prompt as written, 226, the encoder without a
//                        mask, every row seen.
//   anything else:       lower().strip(), 120 (PixArtAlphaPipeline's).
TextPipelineRules pipeline_text_rules(const std::string& pipeline_class);

}  // namespace ditgen::models
