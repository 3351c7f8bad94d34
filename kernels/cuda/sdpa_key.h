// The key of a cached cuDNN attention graph (attention_cudnn.cpp): what a
// built graph fixes. Sizes, strides, dtype, scale, whether keys are masked
// per sample (kv_lens: the graph then takes the lengths as a device tensor,
// so their values are not in the key) and whether the log-sum-exp is
// written. Pointers are not: the graph runs on any operands of its shape.
// Pure host code; tests/cuda_host checks equality and hashing.
#pragma once
#include <cstdint>

#include "kernels/cuda/dtype.h"
#include "kernels/cuda/plan_cache.h"
#include "vocab/attention_args.h"

namespace ditgen::cuda {

struct SdpaKey {
  int device = 0;
  DType dtype = DType::kBF16;
  int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, out_row_stride = 0;
  int64_t q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, out_batch_stride = 0;
  uint32_t scale_bits = 0;
  bool padding_mask = false;  // kv_lens given
  bool stats = false;         // lse written

  static SdpaKey of(const AttentionArgs& a, int device) {
    SdpaKey k;
    k.device = device;
    k.dtype = a.dtype;
    k.batch = a.batch;
    k.heads = a.heads;
    k.q_len = a.q_len;
    k.kv_len = a.kv_len;
    k.head_dim = a.head_dim;
    k.q_row_stride = a.q_row_stride;
    k.k_row_stride = a.k_row_stride;
    k.v_row_stride = a.v_row_stride;
    k.out_row_stride = a.out_row_stride;
    k.q_batch_stride = a.q_batch_stride;
    k.k_batch_stride = a.k_batch_stride;
    k.v_batch_stride = a.v_batch_stride;
    k.out_batch_stride = a.out_batch_stride;
    k.scale_bits = float_bits(a.scale);
    k.padding_mask = a.kv_lens != nullptr;
    k.stats = a.lse != nullptr;
    return k;
  }

  bool operator==(const SdpaKey&) const = default;

  uint64_t hash() const {
    return hash_fields(device, static_cast<int>(dtype), batch, heads, q_len, kv_len, head_dim, q_row_stride,
                       k_row_stride, v_row_stride, out_row_stride, q_batch_stride, k_batch_stride, v_batch_stride,
                       out_batch_stride, scale_bits, padding_mask, stats);
  }
};

}  // namespace ditgen::cuda
