// One LoRA key's grammar and its stem's diffusers name (lora_keys.h).
#include "io/lora_keys.h"

#include <string_view>
#include <utility>

#include "io/wan_names.h"

namespace ditgen::io {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Text encoders' LoRA keys (diffusers', ComfyUI's, kohya's): ditgen's
// pipelines, like diffusers' for these models, apply LoRA to the
// transformer only.
constexpr const char* kTextEncoderPrefixes[] = {"text_encoder.", "text_encoder_2.", "text_encoders.", "lora_te_",
                                                "lora_te1_",     "lora_te2_",       "lora_te3_"};

struct Prefix {
  const char* text;
  LoraFormat format;
  const char* config_prefix;
};
constexpr Prefix kPrefixes[] = {
    {"transformer_2.", LoraFormat::kDiffusers, "transformer_2"},
    {"transformer.", LoraFormat::kDiffusers, "transformer"},
    {"base_model.model.", LoraFormat::kPeft, ""},
    {"diffusion_model.", LoraFormat::kComfy, ""},
    {"lora_unet_", LoraFormat::kKohya, ""},
};

struct Suffix {
  const char* text;
  LoraPart part;
};
constexpr Suffix kSuffixes[] = {
    {".lora_A.weight", LoraPart::kDown},     {".lora_down.weight", LoraPart::kDown}, {".lora_B.weight", LoraPart::kUp},
    {".lora_up.weight", LoraPart::kUp},      {".lora_B.bias", LoraPart::kUpBias},    {".alpha", LoraPart::kAlpha},
    {".diff", LoraPart::kDiff},              {".diff_b", LoraPart::kDiffBias},       {".diff_m", LoraPart::kDiffTable},
    {".dora_scale", LoraPart::kDoraScale},
};

// Adapter kinds that are not LoRA, by a piece of their key names.
struct Unsupported {
  const char* marker;
  const char* reason;
};
constexpr Unsupported kUnsupported[] = {
    {"lora_magnitude_vector", "a DoRA magnitude vector (peft's use_dora): not supported"},
    {".hada_", "a LoHa adapter: not supported"},
    {".lokr_", "a LoKr adapter: not supported"},
    {".lora_mid.", "a LoCon mid weight (a convolution LoRA): not supported"},
    {".set_weight", "a replacement weight (ComfyUI's set_weight): not supported"},
};

bool is_table_name(std::string_view name) {
  return name == "scale_shift_table" || ends_with(name, ".scale_shift_table");
}

std::string underscored(std::string s) {
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

}  // namespace

LoraKeyParse parse_lora_key(const std::string& key) {
  LoraKeyParse out;
  for (const char* p : kTextEncoderPrefixes)
    if (starts_with(key, p)) {
      out.skipped = "text encoder";
      return out;
    }
  LoraKeyName name;
  std::string_view rest = key;
  for (const Prefix& p : kPrefixes)
    if (starts_with(key, p.text)) {
      name.format = p.format;
      name.config_prefix = p.config_prefix;
      rest.remove_prefix(std::string_view(p.text).size());
      break;
    }
  for (const Suffix& s : kSuffixes)
    if (ends_with(rest, s.text)) {
      name.part = s.part;
      name.stem = std::string(rest.substr(0, rest.size() - std::string_view(s.text).size()));
      if (s.part == LoraPart::kDoraScale) {
        out.skipped = "DoRA scale (dropped, as diffusers drops it: the rest applies as plain LoRA)";
        return out;
      }
      if (name.stem.empty()) {
        out.unknown = "no module name before its " + std::string(s.text + 1);
        return out;
      }
      out.name = std::move(name);
      return out;
    }
  for (const Unsupported& u : kUnsupported)
    if (key.find(u.marker) != std::string::npos) {
      out.unknown = u.reason;
      return out;
    }
  out.unknown = "no LoRA part this reader knows (lora_A / lora_B / lora_down / lora_up .weight, lora_B.bias, alpha, "
                "diff, diff_b, diff_m)";
  return out;
}

LoraNameResolver::LoraNameResolver(const std::vector<std::string>& model_tensor_names)
    : model_names_(model_tensor_names.begin(), model_tensor_names.end()) {
  for (const std::string& tensor : model_names_) {
    std::string module = tensor;
    for (std::string_view suffix : {".weight", ".bias"})
      if (ends_with(module, suffix)) module.resize(module.size() - suffix.size());
    auto [it, inserted] = underscored_.try_emplace(underscored(module), module);
    if (!inserted && it->second != module) it->second = std::nullopt;  // two names, one spelling
  }
}

std::optional<LoraNameResolver::Resolved> LoraNameResolver::diffusers_name(const std::string& name) const {
  const bool table = is_table_name(name);
  return Resolved{name, table || model_names_.count(name) != 0, table};
}

std::optional<LoraNameResolver::Resolved> LoraNameResolver::from_kohya(const std::string& underscored_name,
                                                                     std::string* why) const {
  // musubi-tuner's Wan names first (what diffusers' Wan loader reads), then
  // the model's own names spelt with underscores (kohya's sd-scripts style)
  if (std::optional<std::string> original = wan_original_from_underscored(underscored_name))
    return diffusers_name(*wan_original_to_diffusers(*original));
  auto it = underscored_.find(underscored_name);
  if (it == underscored_.end()) {
    *why = model_names_.empty()
               ? "a kohya name ('_' for '.') that only the model's tensor names resolve, and none were given"
               : "a kohya name ('_' for '.') that spells none of the model's tensors";
    return std::nullopt;
  }
  if (!it->second) {
    *why = "a kohya name ('_' for '.') that spells several of the model's tensors";
    return std::nullopt;
  }
  return diffusers_name(*it->second);
}

std::optional<LoraNameResolver::Resolved> LoraNameResolver::resolve(const LoraKeyName& key, std::string* why) const {
  const bool table = key.part == LoraPart::kDiffTable;
  std::optional<Resolved> out;
  switch (key.format) {
    case LoraFormat::kKohya:
      out = from_kohya(table ? key.stem + "_modulation" : key.stem, why);
      break;
    case LoraFormat::kComfy: {
      const std::string stem = table ? key.stem + ".modulation" : key.stem;
      if (std::optional<std::string> d = wan_original_to_diffusers(stem))
        out = diffusers_name(*d);
      else if (!table)
        out = diffusers_name(stem);
      else
        *why = "diff_m names the modulation table of a Wan block or head, and '" + stem + "' is none";
      break;
    }
    case LoraFormat::kDiffusers:
    case LoraFormat::kPeft:
      if (!table)
        out = diffusers_name(key.stem);
      else
        *why = "diff_m (a Wan modulation table) is read in Wan's original names, under diffusion_model.";
      break;
  }
  if (out && table && !out->table) {
    *why = "diff_m names '" + out->name + "', which is not a modulation table";
    return std::nullopt;
  }
  return out;
}

}  // namespace ditgen::io
