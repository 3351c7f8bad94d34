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
#pragma once
#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace ditgen::io {

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
};

}  // namespace ditgen::io
