// Changes added to a model part's tensors as they load: LoRA merged at load
// (docs/lora.md). Every family's weights reach it through the one path they
// all take, WeightStore::load / load_rows / load_cols (io/safetensors.h),
// by tensor name, so no family has LoRA code and tensor parallelism's
// slices (a column-parallel layer's rows, a row-parallel one's columns)
// each get their own part of the change.
//
// io/ knows no model and no op: this interface says which tensors change
// and is handed each loaded part in float32 (an owned copy, never the
// file's map) to add its change to; models/lora_merge.h implements it with
// ops/lora_delta.h. The store converts nothing else: the part goes on to
// the model's placement (bfloat16, packed, int8) as any float32 weight does.
//
// LoRA applied at run time (lora_apply "runtime", and a GGUF block-quantized
// weight's by default) is no change to the loaded tensor: the weight loads
// as stored and the linear layer that reads it asks runtime_terms for the
// low-rank pairs to add beside it (models/nn/lora_terms.h), slicing them to
// its tp share as it slices the weight.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::io {

// One low-rank change applied at run time: y += factor · (x Aᵀ) Bᵀ.
struct LowRankTerm {
  Tensor a;      // (r, in) host float32, whole
  Tensor b;      // (out, r) host float32, whole
  float factor;  // the strength times the LoRA's scaling (alpha / rank)
};

class WeightEdits {
 public:
  virtual ~WeightEdits() = default;
  // Whether the tensor `name` (the store's name: diffusers') changes.
  virtual bool changes(const std::string& name) const = 0;
  // Adds the change of `name` to `part`: host float32, rows [row_begin,
  // row_begin + part.dim(0)) of the tensor's leading dimension and, for a
  // 2-D tensor, columns [col_begin, col_begin + part.dim(1)) (whole for
  // any other rank).
  virtual void apply(const std::string& name, Tensor& part, int64_t row_begin, int64_t col_begin) const = 0;
  // The low-rank changes of the weight `name` applied at run time, beside
  // it, in the order given (none: merged or unchanged). Asking marks the
  // tensor taken (runtime_untaken).
  virtual std::vector<LowRankTerm> runtime_terms(const std::string& /*name*/) const { return {}; }
  // The tensors with run-time changes that were loaded (the store asked
  // changes() for them) and that no layer asked runtime_terms for: a weight
  // read by something other than a linear layer, which nothing would apply
  // them to. (A tensor this rank never loads, another pipeline stage's, is
  // not one.)
  virtual std::vector<std::string> runtime_untaken() const { return {}; }
};

}  // namespace ditgen::io
