// Internal to kernels/cuda/: the argument checks every CUDA attention entry
// point (flash, math, dispatch) runs before launching anything, so a bad
// call is a clear std::invalid_argument rather than a fault on the device.
// Host-only header.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_ops.h"

namespace ditgen::cuda {

inline void check_attention_args(const AttentionArgs& a, const char* who) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument(std::string(who) + ": " + why); };
  if (!a.q || !a.k || !a.v || !a.out) fail("null q/k/v/out");
  if (a.batch < 0 || a.heads < 1 || a.q_len < 0 || a.kv_len < 1 || a.head_dim < 1)
    fail("bad sizes (batch " + std::to_string(a.batch) + ", heads " + std::to_string(a.heads) + ", q_len " +
         std::to_string(a.q_len) + ", kv_len " + std::to_string(a.kv_len) + ", head_dim " +
         std::to_string(a.head_dim) + ")");
  const int64_t inner = a.heads * a.head_dim;
  if (a.q_row_stride < inner || a.k_row_stride < inner || a.v_row_stride < inner || a.out_row_stride < inner)
    fail("row strides must cover heads * head_dim = " + std::to_string(inner));
  if (a.kv_lens)  // host memory (vocab/attention_args.h)
    for (int64_t b = 0; b < a.batch; ++b)
      if (a.kv_lens[b] < 1 || a.kv_lens[b] > a.kv_len)
        fail("kv_lens[" + std::to_string(b) + "] = " + std::to_string(a.kv_lens[b]) + " outside [1, kv_len = " +
             std::to_string(a.kv_len) + "]");
}

}  // namespace ditgen::cuda
