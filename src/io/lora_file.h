// LoRA adapter files, in every naming people save them in, read into one
// normalized list of changes keyed by the diffusers tensor names ditgen's
// modules load ("blocks.3.attn1.to_q.weight").
//
// A file is a .safetensors (opened through io::SafetensorsFile, so every
// offset, size and dtype is checked first); pickle checkpoints (.pt, .pth,
// .ckpt, .bin) are refused unread. Each key is read on its own, by its
// prefix (the naming) and its suffix (the part), as diffusers' loaders and
// ComfyUI read them (docs/lora.md lists the rules and where each comes from):
//
//   diffusers  `transformer.` / `transformer_2.` / no prefix, diffusers'
//              module names; `lora_A.weight`, `lora_B.weight`,
//              `lora_B.bias`; rank and alpha from the file's
//              `lora_adapter_metadata` (io/lora_adapter_config.h), else
//              alpha = rank.
//   peft       `base_model.model.`: the same, alpha from adapter_config.json
//              beside the file.
//   kohya      `lora_unet_` + the module name with `_` for `.` (Wan:
//              musubi-tuner's original names; the other families: diffusers'
//              names, resolved against the model's tensor names);
//              `lora_down.weight`, `lora_up.weight`, `.alpha`.
//   comfy      `diffusion_model.` + Wan's original names (ComfyUI's,
//              lightx2v's) or, for a name Wan's table does not hold,
//              diffusers' names; lora_down / lora_up / lora_A / lora_B,
//              `.alpha`.
//   any        full-tensor deltas: `.diff` (a weight, or a parameter such as
//              a scale_shift_table), `.diff_b` (a bias), `.diff_m` (a Wan
//              modulation table, lightx2v's name).
//
// Text-encoder keys (`text_encoder.`, `text_encoders.`, `lora_te_`,
// `lora_te1_` ...) and DoRA scales are skipped with the reason, as diffusers
// skips them; every other key lands in a target or in `unknown` with why.
// A key family with a missing half, inconsistent shapes, a non-floating
// dtype, an alpha that is not one finite number, two keys changing the same
// tensor: ModelError naming the file and the key. Nothing here knows a
// model: whether each target names a tensor of the model, of its shape, is
// io/lora_coverage.h's question.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::io {

enum class LoraFormat { kDiffusers, kPeft, kKohya, kComfy };
const char* lora_format_name(LoraFormat f);  // "diffusers", "peft", "kohya", "comfy"

// What a target changes: a weight through a low-rank pair, or a whole
// weight, bias or modulation table through a full-tensor delta.
enum class LoraKind { kLowRank, kWeight, kBias, kTable };
const char* lora_kind_name(LoraKind k);  // "low-rank", "weight", "bias", "table"

// The expert of a two-expert model (Wan 2.2 A14B) a target is for, where
// the file says: keys under `transformer_2.` are the low-noise expert's,
// and then those under `transformer.` the high-noise one's; otherwise kAny
// (the configuration's `target` decides).
enum class LoraExpert { kAny, kTransformer, kTransformer2 };
const char* lora_expert_name(LoraExpert e);  // "any", "transformer", "transformer_2"

struct LoraTarget {
  std::string tensor;  // the diffusers name of the tensor it changes
  LoraKind kind = LoraKind::kLowRank;
  LoraExpert expert = LoraExpert::kAny;
  Tensor a;      // kLowRank: (rank, in), lora_A / lora_down; float32
  Tensor b;      // kLowRank: (out, rank), lora_B / lora_up; float32
  Tensor delta;  // the others: the change itself, of the target's shape; float32
  int64_t rank = 0;    // kLowRank, and a LoRA's bias (lora_B.bias): its pair's rank; else 0
  double alpha = 0;    // the same: the file's alpha (the rank where it gives none); else 0
  // What the stored change is multiplied by: alpha / rank (rsLoRA:
  // alpha / sqrt(rank)) for a LoRA's weight and bias, 1 for a full delta.
  // The change at strength s is s * scaling * (b · a | delta).
  double scaling = 1;
  std::vector<std::string> keys;  // the file's keys it was read from
};

// A key read and not applied (skipped), or not understood (unknown), and why.
struct LoraKeyNote {
  std::string key;
  std::string reason;
};

struct LoraFile {
  std::string path;
  std::vector<LoraFormat> formats;   // the namings its keys use, in enum order
  std::vector<LoraTarget> targets;   // sorted by expert, then tensor name
  std::vector<LoraKeyNote> skipped;  // text-encoder keys, DoRA scales
  std::vector<LoraKeyNote> unknown;  // keys that name nothing this reader knows
  int64_t keys = 0;                  // the file's tensors: the sum of the three
};

struct LoraReadOptions {
  // The model's tensor names (diffusers'), which resolve kohya names whose
  // underscores stand for dots (`lora_unet_transformer_blocks_0_attn1_to_q`)
  // and tell which full-tensor deltas are a parameter's; without them such
  // kohya keys are unknown (musubi-tuner's Wan names resolve regardless).
  std::vector<std::string> model_tensor_names;
};

// Reads and normalizes the LoRA file at `path` (above). ConfigError (exit 2)
// for a pickle checkpoint or an adapter this reader does not support
// (DoRA, regular-expression patterns); ModelError (exit 3) for a malformed
// file.
LoraFile read_lora_file(const std::string& path, const LoraReadOptions& options = {});

}  // namespace ditgen::io
