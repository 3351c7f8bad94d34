// Where the operands of one scaled dot-product attention lie in memory:
// tokens are rows, element (b, n, h, d) of q lives at
// q + b*q_batch_stride + n*q_row_stride + h*head_dim + d (in elements of
// dtype); same for k, v, out. This lets attention read Q/K/V straight out of
// projection outputs, no transposes. Sample b attends to its first
// kv_lens[b] keys when kv_lens is given (cross-attention to prompts of
// different lengths, padded to kv_len), to all kv_len otherwise; rows of q
// and out are never masked. An optional float32 bias is added to the scaled
// scores before the softmax (T5's relative position bias: T5 also has no
// 1/sqrt(d) scaling, scale = 1); the CPU and the CUDA math path take it, the
// CUDA flash kernel does not (kernels/cuda/attention_path.h). One definition
// for the op front end (ops::AttentionArgs adds the device) and the CUDA
// kernels (cuda::attention); no CUDA syntax.
#pragma once
#include <cstdint>

#include "vocab/dtype.h"

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
  // The arithmetic of the two products (q k^T and p v): float32, or
  // bfloat16 (CPU: the scaled queries, keys, values and probabilities
  // rounded to bfloat16, exact products, float32 sums; scores, softmax and
  // output float32). CUDA computes in its operands' dtype and ignores it.
  DType compute = DType::kF32;
  // Optional float32 (batch, heads, q_len) output, in the operands' memory:
  // each row's log-sum-exp of the scaled (and biased) scores, so partial
  // results over key blocks can be merged (ring attention). Null: not written.
  float* lse = nullptr;
  // Optional per-sample key counts: `batch` int32 values in [1, kv_len], in
  // host memory (whatever the operands' device). Keys at positions >=
  // kv_lens[b] take no part in sample b's softmax (nor its lse). Null: every
  // sample uses all kv_len keys.
  const int32_t* kv_lens = nullptr;
  // Optional float32 additive score bias, in the operands' device memory:
  //   score(b, h, i, j) = scale * q·k + bias[h * bias_head_stride + i * bias_row_stride + j],
  // the same for every sample b (T5's relative position bias); i indexes
  // this call's queries [0, q_len), j its keys [0, kv_len). Null: no bias.
  // It combines with kv_lens (keys >= kv_lens[b] still take no part) and lse
  // (of the biased scores). A stride of 0 repeats one row, or one head's table.
  const float* bias = nullptr;
  int64_t bias_head_stride = 0, bias_row_stride = 0;
};

}  // namespace ditgen
