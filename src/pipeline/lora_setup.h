// A run's LoRA files (the config's `lora` list, `lora_strict`) read, checked
// against the model's transformers and turned into the changes each one's
// weights take as they load (models/lora_merge.h), before any weight is
// read. Knows no family: a transformer is known by its weight store's
// tensor names and shapes.
//
// Which transformer a file changes: lora[i].target (default "transformer",
// as diffusers' load_lora_weights), except that keys a file writes under
// `transformer_2.` are the second expert's, and then its `transformer.`
// keys the first's (io/lora_file.h). A target naming transformer_2 on a
// one-transformer model is a ConfigError. Coverage (io/lora_coverage.h):
// keys that match no tensor (or its shape) are exit 2 naming the count and
// the first keys, or a warning with lora_strict false.
//
// Merged or at run time (lora_apply): a low-rank change is merged into a
// float weight at load, and applied beside it at run time (the weight
// unchanged, models/nn/lora_terms.h) with lora_apply "runtime" and, by
// default, on a GGUF block-quantized weight. Full-tensor deltas and LoRA
// biases always merge (biases and tables are float); merging into GGUF
// blocks (lora_apply "merge", or a .diff of such a weight) is exit 2.
// model.quantize "int8" weights are float when they load: merged before
// they are quantized unless lora_apply says "runtime".
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/weight_edits.h"

namespace ditgen::pipeline {

struct ModelParts;

// One LoRA as the outputs' metadata names it.
struct LoraRecord {
  std::string path;    // as configured
  std::string sha256;  // of the file's bytes, 64 hex digits
  double scale = 1;
  std::string target;  // lora[i].target's name
};

// The config's rules for its LoRAs.
struct LoraRules {
  bool strict = true;              // lora_strict
  std::optional<LoraApply> apply;  // lora_apply; none: as the weight is stored (above)
};

struct LoraSetup {
  std::shared_ptr<const io::WeightEdits> transformer;    // null: no change
  std::shared_ptr<const io::WeightEdits> transformer_2;  // the second expert's
  // One line per LoRA ("lora x.safetensors (diffusers): 64 keys applied
  // ..."), then each coverage warning (lora_strict false).
  std::vector<std::string> lines;
  std::vector<LoraRecord> records;
};

// Reads every file of `loras` and checks it against `parts` (above);
// `where` (the config file) names a wrong target in messages.
LoraSetup setup_lora(const std::vector<LoraConfig>& loras, const LoraRules& rules, const ModelParts& parts,
                     const std::string& where);

// After a transformer's weights loaded with `edits`: ConfigError (exit 2)
// naming `part` and the first tensor loaded whose run-time change no
// linear layer took (a weight no linear layer reads: nothing would apply
// it).
void check_runtime_lora_taken(const io::WeightEdits* edits, const std::string& part);

}  // namespace ditgen::pipeline
