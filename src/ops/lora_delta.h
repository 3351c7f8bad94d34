// LoRA's arithmetic on float32 tensors, for whoever applies a LoRA file's
// changes (io/lora_file.h reads them; `factor` is the user's strength times
// the target's scaling, alpha / rank):
//   merged into a weight   W (out, in) += factor · B (out, r) · A (r, in)
//   at run time            y (..., out) += factor · (x (..., in) · A^T) · B^T
//   a full-tensor delta    T += factor · D, of T's shape
// and tensor parallelism's share of A or D (lora_columns).
// The low-rank forms go through ops::gemm (any device: all operands on one;
// the run-time form's (rows, r) product is its only temporary); the full
// delta is a loop on the host, where merging at load happens. Wrong shapes
// or dtypes: std::invalid_argument naming the function.
#pragma once
#include "tensor/tensor.h"

namespace ditgen::ops {

void lora_merge_(Tensor& w, const Tensor& a, const Tensor& b, float factor);
void lora_apply_(const Tensor& x, const Tensor& a, const Tensor& b, float factor, Tensor& y);
void lora_add_delta_(Tensor& t, const Tensor& delta, float factor);
// Columns [begin, begin + count) of the 2-D host float32 `t`, copied (`t`
// itself when they are all of it): a row-parallel layer's share of an A
// (r, in) or of a full delta. std::out_of_range outside `t`.
Tensor lora_columns(const Tensor& t, int64_t begin, int64_t count);

}  // namespace ditgen::ops
