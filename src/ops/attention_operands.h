// Building one attention call (ops::AttentionArgs) from tensors. Each of q,
// k, v and out is described by where its token rows lie (TokenRows): a
// tensor, the element where sample 0's first token starts (a column offset
// picks q, k or v out of a fused projection buffer), the elements from one
// token to the next, and the tokens per sample; samples follow each other
// (batch stride = len * row_stride) unless a batch stride is given (a video's
// frames of one token: samples = tokens, one row apart, their sequence the
// frames, a frame apart). attention_args then fills the strides,
// the sizes and scale = 1/sqrt(head_dim), and checks that every row it will
// touch lies inside its tensor. Optional extras (lse, kv_lens) are set on the
// result by the caller.
#pragma once
#include <cstdint>

#include "ops/ops.h"
#include "tensor/tensor.h"

namespace ditgen::ops {

struct TokenRows {
  const Tensor* tensor = nullptr;
  int64_t offset = 0;      // element of sample 0's token 0
  int64_t row_stride = 0;  // elements from one token to the next
  int64_t len = 0;         // tokens per sample
  int64_t batch_stride = 0;  // elements from one sample to the next; 0 = len * row_stride
  int64_t sample_stride() const { return batch_stride ? batch_stride : len * row_stride; }
};

// The token rows of x, a (B, N, C) tensor (or any tensor viewed as B samples
// of N rows of `row_stride` elements), starting at column `col`.
TokenRows rows_of(const Tensor& x, int64_t col = 0);
TokenRows rows_of(const Tensor& x, int64_t col, int64_t row_stride, int64_t len);

// Attention of `batch` samples with `heads` heads of head_dim each: out's
// rows (written; its tensor is the destination) get softmax(q k^T * scale) v.
// q and out have the query count, k and v the key count.
AttentionArgs attention_args(const TokenRows& q, const TokenRows& k, const TokenRows& v, const TokenRows& out,
                             int64_t batch, int64_t heads, int64_t head_dim);

}  // namespace ditgen::ops
