// The rank and alpha a LoRA file's peft LoraConfig gives each module: the
// `lora_adapter_metadata` JSON that diffusers' save_lora_weights /
// save_lora_adapter write into the safetensors metadata (fields prefixed
// "transformer." / "transformer_2." for a pipeline's file, bare for a
// model's), or peft's adapter_config.json beside adapter_model.safetensors.
//
// peft's rules (tuners/lora/model.py, layer.py): a module's rank is
// rank_pattern's value for the first pattern matching its name, else `r`;
// its alpha likewise from alpha_pattern, else `lora_alpha`; the LoRA's
// scaling is alpha / rank, or alpha / sqrt(rank) with use_rslora. Missing
// fields take LoraConfig's defaults (r 8, lora_alpha 8), as diffusers builds
// the LoraConfig from the metadata alone. A pattern matches a module as
// peft's get_pattern_key does, re.match(r"(.*\.)?(PATTERN)$", module): the
// whole name or a suffix of it starting after a dot; of regular expressions
// this reader evaluates `.` (any character) and a leading `^` (the whole
// name), and refuses the rest (ConfigError: not supported).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditgen::io {

struct LoraAdapterConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  std::vector<std::pair<std::string, int64_t>> rank_pattern;  // in the JSON's order (sorted keys)
  std::vector<std::pair<std::string, double>> alpha_pattern;
  bool use_rslora = false;

  int64_t rank_for(const std::string& module) const;
  double alpha_for(const std::string& module) const;
  // What peft multiplies lora_B · lora_A by: alpha / rank (rsLoRA: / sqrt(rank)).
  double scaling(double alpha, int64_t rank) const;
};

// An object of LoraConfig fields; ModelError naming `where` and the field
// (written `field_prefix` + name) on a wrong type or value, ConfigError for a
// DoRA config or a pattern this reader does not evaluate.
LoraAdapterConfig parse_lora_adapter_config(const nlohmann::json& fields, const std::string& where,
                                            const std::string& field_prefix = "");

// The configs in a `lora_adapter_metadata` JSON text, by the prefix of their
// field names: "" (a model's file), "transformer", "transformer_2".
std::map<std::string, LoraAdapterConfig> parse_lora_adapter_metadata(const std::string& json_text,
                                                                     const std::string& where);

// peft's match of a rank / alpha pattern against a module name (above).
// `pattern` must be supported (parse_lora_adapter_config checks).
bool peft_pattern_matches(const std::string& pattern, const std::string& module);

}  // namespace ditgen::io
