// Whether a read LoRA file (io/lora_file.h) fits the model it is applied to,
// and the one line ditgen prints per LoRA. The model is known here only by
// a function giving a tensor's shape by name, so this stays below the
// model layer.
//
// A target applies when the model has its tensor with the shape it changes
// (a low-rank pair: a 2-D weight of (b rows, a columns); a full delta: its
// own shape) and it is for this expert (a target of kAny is for every
// expert; a single-transformer model is `transformer`). A target the model
// lacks, or shapes otherwise, is unmatched, and so is every unknown key of
// the file: with strict coverage (`lora_strict`, the default) that is a
// ConfigError (exit 2) naming the count and the first keys; otherwise a
// warning, and the rest applies (as ComfyUI does).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/lora_file.h"
#include "tensor/tensor.h"

namespace ditgen::io {

struct LoraMatch {
  std::vector<const LoraTarget*> applied;       // for this model and expert, name and shape right
  std::vector<LoraKeyNote> unmatched;           // keys of the targets that are not, and unknown keys
  std::vector<const LoraTarget*> other_expert;  // for the other expert of a two-expert model
};

// `shape_of(tensor)`: the model's tensor of that diffusers name, nullopt if
// it has none. `expert`: which transformer the model is (kAny: the only one,
// counted as kTransformer).
LoraMatch match_lora(const LoraFile& file, LoraExpert expert,
                     const std::function<std::optional<Shape>(const std::string&)>& shape_of);

// "lora style.safetensors (kohya): 64 keys applied to 32 tensors (32
// low-rank), 3 skipped (text encoder 3), 0 unmatched": keys applied, keys
// skipped and why, keys that match nothing.
std::string lora_report_line(const LoraFile& file, const LoraMatch& match);

// Unmatched keys: ConfigError when `strict` ("<file>: N LoRA keys match no
// tensor of the model (or its shape): key: reason; ... (lora_strict: false
// applies the rest)"); else that text as a warning. "" when all match.
std::string check_lora_coverage(const LoraFile& file, const LoraMatch& match, bool strict);

}  // namespace ditgen::io
