// Where the operands of one scaled dot-product attention lie in memory:
// tokens are rows, element (b, n, h, d) of q lives at
// q + b*q_batch_stride + n*q_row_stride + h*head_dim + d (in elements of
// dtype); same for k, v, out. This lets attention read Q/K/V straight out of
// projection outputs, no transposes. Sample b attends to its first
// kv_lens[b] keys when kv_lens is given (cross-attention to prompts of
// different lengths, padded to kv_len), to all kv_len otherwise; rows of q
// and out are never masked. One definition for the op front end
// (ops::AttentionArgs adds the device) and the CUDA kernels (cuda::attention);
// no CUDA syntax.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ditgen {

// How CUDA attention is computed (--attention): kAuto = flash on compute
// capability >= 8.0 for the head sizes it supports, the math path otherwise;
// kFlash forces flash (an error where it cannot run); kMath forces the math
// path. The CPU has one implementation and ignores the choice. One enum for
// the op front end and the kernels.
enum class AttentionMode { kAuto, kFlash, kMath };

struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  DType dtype = DType::kF32;  // of q, k, v and out
  int64_t batch = 1, heads = 1, q_len = 0, kv_len = 0, head_dim = 0;
  int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, out_row_stride = 0;
  int64_t q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, out_batch_stride = 0;
  float scale = 0;  // usually 1/sqrt(head_dim)
  // Optional float32 (batch, heads, q_len) output, in the operands' memory:
  // each row's log-sum-exp of the scaled scores, so partial results over key
  // blocks can be merged (ring attention). Null: not written.
  float* lse = nullptr;
  // Optional per-sample key counts: `batch` int32 values in [1, kv_len], in
  // host memory (whatever the operands' device). Keys at positions >=
  // kv_lens[b] take no part in sample b's softmax (nor its lse). Null: every
  // sample uses all kv_len keys.
  const int32_t* kv_lens = nullptr;
};

}  // namespace ditgen
