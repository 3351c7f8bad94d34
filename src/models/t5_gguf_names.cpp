#include "models/t5_gguf_names.h"

#include <cctype>
#include <utility>

namespace ditgen::models {

std::optional<std::string> t5_gguf_to_transformers(std::string_view name, bool gated) {
  constexpr std::string_view kWeight = ".weight", kBlock = "enc.blk.";
  if (name.size() <= kWeight.size() || name.substr(name.size() - kWeight.size()) != kWeight) return std::nullopt;
  const std::string_view stem = name.substr(0, name.size() - kWeight.size());
  if (stem == "token_embd") return "shared.weight";
  if (stem == "enc.output_norm") return "encoder.final_layer_norm.weight";
  if (stem.substr(0, kBlock.size()) != kBlock) return std::nullopt;
  const std::string_view rest = stem.substr(kBlock.size());
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  const std::string_view index = rest.substr(0, dot), part = rest.substr(dot + 1);
  for (const char c : index)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  static const std::pair<std::string_view, std::string_view> kParts[] = {
      {"attn_norm", "layer.0.layer_norm"},
      {"attn_q", "layer.0.SelfAttention.q"},
      {"attn_k", "layer.0.SelfAttention.k"},
      {"attn_v", "layer.0.SelfAttention.v"},
      {"attn_o", "layer.0.SelfAttention.o"},
      {"attn_rel_b", "layer.0.SelfAttention.relative_attention_bias"},
      {"ffn_norm", "layer.1.layer_norm"},
      {"ffn_gate", "layer.1.DenseReluDense.wi_0"},
      {"ffn_down", "layer.1.DenseReluDense.wo"},
  };
  std::string_view mapped;
  if (part == "ffn_up") mapped = gated ? "layer.1.DenseReluDense.wi_1" : "layer.1.DenseReluDense.wi";
  for (const auto& [gguf, transformers] : kParts)
    if (part == gguf) mapped = transformers;
  if (mapped.empty()) return std::nullopt;
  return "encoder.block." + std::string(index) + "." + std::string(mapped) + std::string(kWeight);
}

}  // namespace ditgen::models
