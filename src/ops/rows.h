// Row-block moves the models' layouts are made of, on any device and dtype:
// a tensor is read as rows along dim 0 (samples) or dim 1 (each sample's
// tokens), and blocks of them are joined, split, repeated or gathered,
// each block one ops::copy_rows (a strided 2-D copy: cudaMemcpy2D on CUDA).
//   take_rows        per sample, a band of its tokens: (B, P, ...) -> (B, count, ...)
//   join_rows        per sample, two bands one after the other (an MM-DiT's
//                    text rows, then its video rows)
//   repeat_rows      each sample repeated R times in a row (torch's
//                    repeat_interleave: a per-video modulation per frame)
//   sample_rows      the rows of a subset of the samples, in its order (a
//   put_sample_rows  step cache's samples), and written back
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::ops {

// x (B, P, ...) -> (B, count, ...): rows [first, first + count) of each
// sample, a new tensor on x's device in x's dtype. count may be 0.
// std::invalid_argument unless 0 <= first, first + count <= P.
Tensor take_rows(const Tensor& x, int64_t first, int64_t count);

// [a; b] per sample: a (B, Pa, ...) and b (B, Pb, ...) -> (B, Pa + Pb, ...);
// either may have no rows. std::invalid_argument unless they agree in
// everything but dim 1 (device and dtype included).
Tensor join_rows(const Tensor& a, const Tensor& b);

// x (B, ...) -> (B * times, ...): row b at rows [b * times, (b + 1) * times).
Tensor repeat_rows(const Tensor& x, int64_t times);

// The rows of t (dim 0: samples x rows_per_sample, each sample's rows
// together) that belong to `samples`, in their order, on t's device; t
// itself (shared) when samples is empty.
Tensor sample_rows(const Tensor& t, const std::vector<int64_t>& samples, int64_t rows_per_sample = 1);
// Writes `rows` (sample_rows' layout for `samples`) back into those samples' rows of t.
void put_sample_rows(Tensor& t, const Tensor& rows, const std::vector<int64_t>& samples, int64_t rows_per_sample = 1);

}  // namespace ditgen::ops
