// Which CUDA attention implementation runs, as a pure function of the device's
// compute capability, the head size, the storage type and whether the call
// has a score bias, so the rule of DESIGN.md §3 is testable on a machine
// without a GPU.
//
// Flash (attention_flash.cu) runs on every compute capability >= 8.0, written
// as an ordered (major, minor) comparison so that 8.6, 8.9, 9.0, 10.x, 12.x
// and later parts are included (never an equality test on 8.0): its bf16/f16
// kernel uses mma.sync.m16n8k16, an sm_80 instruction. It is compiled for
// head sizes 64, 72 and 128 only, and adds no score bias
// (AttentionArgs::bias, T5's relative position bias). Everything else
// (Volta, Turing, other head sizes, biased scores) takes the cuBLAS math path
// (attention_math.cu), which handles any head size and the bias on any
// device. Forcing flash on a call with a bias is an error (attention.cu).
#pragma once
#include "kernels/cuda/dtype.h"
#include "tensor/attention_args.h"

namespace ditgen::cuda {

enum class AttentionPath { kFlash, kMath };

// The --attention choice (ditgen::AttentionMode, tensor/attention_args.h):
// kAuto applies choose_attention_path; the others force a path (forcing
// flash where it cannot run is an error).

constexpr bool flash_head_dim_supported(int head_dim) {
  return head_dim == 64 || head_dim == 72 || head_dim == 128;
}

constexpr bool compute_capability_at_least(int major, int minor, int want_major, int want_minor) {
  return major > want_major || (major == want_major && minor >= want_minor);
}

// Whether the flash kernel can run at all (all three storage types have a
// flash kernel: tensor cores for bf16/f16, CUDA cores for f32).
constexpr bool flash_supported(int major, int minor, int head_dim, DType dtype) {
  return compute_capability_at_least(major, minor, 8, 0) && flash_head_dim_supported(head_dim) &&
         (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16);
}

// score_bias: the call has AttentionArgs::bias, which only the math path adds.
constexpr AttentionPath choose_attention_path(int major, int minor, int head_dim, DType dtype,
                                              bool score_bias = false) {
  return !score_bias && flash_supported(major, minor, head_dim, dtype) ? AttentionPath::kFlash : AttentionPath::kMath;
}

constexpr const char* attention_path_name(AttentionPath p) { return p == AttentionPath::kFlash ? "flash" : "math"; }

}  // namespace ditgen::cuda
