#include "models/wan_vae_names.h"

#include <cctype>
#include <utility>

namespace ditgen::models {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A residual block's parameter, from its original name's tail: "residual.2.weight" -> "conv1.weight".
std::optional<std::string> residual_tail(std::string_view tail) {
  static const std::pair<std::string_view, std::string_view> kTails[] = {
      {"residual.0.gamma", "norm1.gamma"},   {"residual.2.weight", "conv1.weight"},
      {"residual.2.bias", "conv1.bias"},     {"residual.3.gamma", "norm2.gamma"},
      {"residual.6.weight", "conv2.weight"}, {"residual.6.bias", "conv2.bias"},
      {"shortcut.weight", "conv_shortcut.weight"}, {"shortcut.bias", "conv_shortcut.bias"},
  };
  for (const auto& [original, diffusers] : kTails)
    if (tail == original) return std::string(diffusers);
  return std::nullopt;
}

// A resample's parameter (an upsampler's or a downsampler's), kept as it is.
bool resample_tail(std::string_view tail) {
  return tail == "resample.1.weight" || tail == "resample.1.bias" || tail == "time_conv.weight" ||
         tail == "time_conv.bias";
}

// "12.residual.0.gamma" -> {12, "residual.0.gamma"}; nullopt without a leading index.
std::optional<std::pair<int64_t, std::string_view>> indexed(std::string_view s) {
  size_t digits = 0;
  while (digits < s.size() && digits < 9 && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits >= s.size() || s[digits] != '.') return std::nullopt;
  return std::pair{std::stoll(std::string(s.substr(0, digits))), s.substr(digits + 1)};
}

// The names an encoder and a decoder share: conv1, middle.*, head.*.
std::optional<std::string> shared_part(std::string_view side, std::string_view rest) {
  if (rest == "conv1.weight" || rest == "conv1.bias") return std::string(side) + "conv_in." + std::string(rest.substr(6));
  if (rest == "head.0.gamma") return std::string(side) + "norm_out.gamma";
  if (rest == "head.2.weight" || rest == "head.2.bias") return std::string(side) + "conv_out." + std::string(rest.substr(7));
  for (const auto& [index, resnet] : {std::pair{"middle.0.", "0"}, std::pair{"middle.2.", "1"}})
    if (starts_with(rest, index))
      if (const auto tail = residual_tail(rest.substr(9)); tail && !starts_with(*tail, "conv_shortcut"))
        return std::string(side) + "mid_block.resnets." + resnet + "." + *tail;
  if (starts_with(rest, "middle.1.")) {
    const std::string_view tail = rest.substr(9);
    if (tail == "norm.gamma" || tail == "to_qkv.weight" || tail == "to_qkv.bias" || tail == "proj.weight" ||
        tail == "proj.bias")
      return std::string(side) + "mid_block.attentions.0." + std::string(tail);
  }
  return std::nullopt;
}

// What Wan 2.1's and 2.2's names share: the quant convs and each side's
// conv1, middle and head.
std::optional<std::string> common_name(std::string_view name) {
  if (name == "conv1.weight" || name == "conv1.bias") return "quant_conv." + std::string(name.substr(6));
  if (name == "conv2.weight" || name == "conv2.bias") return "post_quant_conv." + std::string(name.substr(6));
  for (const std::string_view side : {std::string_view("encoder."), std::string_view("decoder.")})
    if (starts_with(name, side))
      if (auto shared = shared_part(side, name.substr(side.size()))) return shared;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> wan22_vae_original_to_diffusers(std::string_view name) {
  if (auto common = common_name(name)) return common;
  struct Side {
    std::string_view original, inner, diffusers, resample;
  };
  for (const Side& side : {Side{"encoder.downsamples.", "downsamples.", "encoder.down_blocks.", "downsampler."},
                           Side{"decoder.upsamples.", "upsamples.", "decoder.up_blocks.", "upsampler."}}) {
    if (!starts_with(name, side.original)) continue;
    const auto level = indexed(name.substr(side.original.size()));
    if (!level || !starts_with(level->second, side.inner)) return std::nullopt;
    const auto entry = indexed(level->second.substr(side.inner.size()));
    if (!entry) return std::nullopt;
    const std::string block = std::string(side.diffusers) + std::to_string(level->first) + ".";
    if (const auto tail = residual_tail(entry->second))
      return block + "resnets." + std::to_string(entry->first) + "." + *tail;
    // The resample's index (after the block's residual blocks) is dropped.
    if (resample_tail(entry->second)) return block + std::string(side.resample) + std::string(entry->second);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::string> wan_vae_original_to_diffusers(std::string_view name, int64_t resnets_per_block,
                                                         int64_t up_blocks) {
  if (auto common = common_name(name)) return common;
  if (starts_with(name, "encoder.downsamples.")) {
    const auto at = indexed(name.substr(20));
    if (!at) return std::nullopt;
    const std::string block = "encoder.down_blocks." + std::to_string(at->first) + ".";
    if (const auto tail = residual_tail(at->second)) return block + *tail;
    if (resample_tail(at->second)) return block + std::string(at->second);
    return std::nullopt;
  }
  if (starts_with(name, "decoder.upsamples.")) {
    const auto at = indexed(name.substr(18));
    if (!at || resnets_per_block < 1) return std::nullopt;
    // Every block but the last ends in its resample: resnets_per_block + 1 entries.
    const int64_t stride = resnets_per_block + 1, block = at->first / stride, entry = at->first % stride;
    if (block >= up_blocks) return std::nullopt;
    const std::string up = "decoder.up_blocks." + std::to_string(block) + ".";
    if (entry < resnets_per_block) {
      const auto tail = residual_tail(at->second);
      if (!tail) return std::nullopt;
      return up + "resnets." + std::to_string(entry) + "." + *tail;
    }
    if (block + 1 < up_blocks && resample_tail(at->second)) return up + "upsamplers.0." + std::string(at->second);
  }
  return std::nullopt;
}

}  // namespace ditgen::models
