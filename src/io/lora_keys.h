// The grammar of one LoRA key (io/lora_file.h lists the namings): its prefix
// says the naming and, for a pipeline's file, the expert; its suffix the
// part (down, up, alpha, a full delta ...); what is between is the stem, the
// module or parameter name as the file spells it. LoraNameResolver turns a
// stem into diffusers' name: as written (diffusers, peft), through Wan's
// table (comfy: original names; kohya: musubi-tuner's underscored original
// names), or through the model's own names with `_` for `.` (kohya).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/lora_file.h"

namespace ditgen::io {

enum class LoraPart {
  kDown,       // lora_A.weight, lora_down.weight: (rank, in)
  kUp,         // lora_B.weight, lora_up.weight: (out, rank)
  kUpBias,     // lora_B.bias: a LoRA's bias, scaled as its pair
  kAlpha,      // .alpha
  kDiff,       // .diff: a whole weight's (or parameter's) change
  kDiffBias,   // .diff_b: a bias's change
  kDiffTable,  // .diff_m: the change of the stem's Wan modulation table
  kDoraScale,  // .dora_scale: skipped, as diffusers drops it
};

struct LoraKeyName {
  LoraFormat format = LoraFormat::kDiffusers;
  // "transformer" / "transformer_2" for keys under those prefixes: the
  // expert, and which metadata config holds their rank and alpha ("" for
  // unprefixed diffusers and peft keys; kohya and comfy keys have none).
  std::string config_prefix;
  std::string stem;
  LoraPart part = LoraPart::kDown;
};

// A key read by its name: a LoraKeyName, or skipped / unknown with a reason.
struct LoraKeyParse {
  std::optional<LoraKeyName> name;
  std::string skipped;  // why it is not applied (text encoder), if so
  std::string unknown;  // why it is not understood, if so
};
LoraKeyParse parse_lora_key(const std::string& key);

class LoraNameResolver {
 public:
  explicit LoraNameResolver(const std::vector<std::string>& model_tensor_names);

  struct Resolved {
    std::string name;        // diffusers' module ("blocks.0.attn1.to_q") or parameter name
    bool parameter = false;  // a tensor of its own (a table, or a model tensor of that exact name)
    bool table = false;      // a modulation table (scale_shift_table)
  };
  // The diffusers name of a key's stem (for kDiffTable: of the stem's
  // modulation table), or nullopt with the reason in *why.
  std::optional<Resolved> resolve(const LoraKeyName& key, std::string* why) const;

 private:
  std::optional<Resolved> diffusers_name(const std::string& name) const;
  std::optional<Resolved> from_kohya(const std::string& underscored, std::string* why) const;

  std::set<std::string> model_names_;
  // the model's module and parameter names with `_` for `.`; nullopt where
  // two names give the same spelling
  std::map<std::string, std::optional<std::string>> underscored_;
};

}  // namespace ditgen::io
