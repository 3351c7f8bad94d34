// Which CUDA attention implementation runs, as a pure function of the device's
// compute capability, the head size, the storage type, whether the call
// has a score bias and whether cuDNN's attention can take it, so the rule of
// docs/design.md §3 is testable on a machine without a GPU.
//
// cuDNN's fused flash attention (SDPA through its graph API,
// attention_cudnn.cpp) comes first where it can run: compute capability
// >= 8.0 (an ordered comparison: 8.6, 8.9, 9.0, 10.x, 12.x and later
// included, never an equality test on 8.0), bfloat16 or float16 operands,
// head sizes that are multiples of 8 up to 128 (64, 72 and 128 among them),
// operands cuDNN can address (cudnn_sdpa_operands_aligned: 16-byte aligned
// pointers and strides), a build with cudnn-frontend whose process loaded
// libcudnn, and no score bias. Where cuDNN then has no plan for a shape,
// attention.cu falls back to the own flash kernel.
//
// The own flash kernel (attention_flash.cu) runs on every compute
// capability >= 8.0: its bf16/f16 kernel uses mma.sync.m16n8k16, an sm_80
// instruction. It is compiled for head sizes 64, 72 and 128 only, and adds
// no score bias (AttentionArgs::bias, T5's relative position bias). float32
// attention takes it (cuDNN's SDPA has no float32 form).
// Everything else (Volta, Turing, other head sizes, biased scores) takes the
// cuBLAS math path (attention_math.cu), which handles any head size and the
// bias on any device. Forcing flash on a call with a bias is an error
// (attention.cu); forcing flash takes cuDNN's flash attention where it can
// run, the own kernel otherwise.
#pragma once
#include <cstdint>

#include "kernels/cuda/dtype.h"
#include "vocab/attention_args.h"

namespace ditgen::cuda {

enum class AttentionPath { kFlash, kMath, kCudnn };

// The --attention choice (ditgen::AttentionMode, vocab/attention_args.h):
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

// Head sizes cuDNN's SDPA takes on every generation from Ampere on.
constexpr bool cudnn_sdpa_head_dim_supported(int head_dim) {
  return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0;
}

// Whether cuDNN's SDPA can run this kind of call at all (the device and
// operand types; the build, the loaded library and the operands' addresses
// are the caller's `cudnn` flag below).
constexpr bool cudnn_sdpa_supported(int major, int minor, int head_dim, DType dtype) {
  return compute_capability_at_least(major, minor, 8, 0) && cudnn_sdpa_head_dim_supported(head_dim) &&
         (dtype == DType::kBF16 || dtype == DType::kF16);
}

// cuDNN addresses q, k, v and out in 16-byte units: every pointer and every
// row and batch stride (in bytes) a multiple of 16. Pure arithmetic on the
// addresses, so tests/ops checks it without a device.
inline bool cudnn_sdpa_operands_aligned(const AttentionArgs& a) {
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  auto ok_ptr = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  auto ok_stride = [es](int64_t s) { return (s * es) % 16 == 0; };
  return ok_ptr(a.q) && ok_ptr(a.k) && ok_ptr(a.v) && ok_ptr(a.out) && ok_stride(a.q_row_stride) &&
         ok_stride(a.k_row_stride) && ok_stride(a.v_row_stride) && ok_stride(a.out_row_stride) &&
         ok_stride(a.q_batch_stride) && ok_stride(a.k_batch_stride) && ok_stride(a.v_batch_stride) &&
         ok_stride(a.out_batch_stride) && ok_stride(a.head_dim);
}

// score_bias: the call has AttentionArgs::bias, which only the math path adds.
// cudnn: this build has cuDNN attention, the process loaded libcudnn, it is
// not switched off (DITGEN_CUDNN_ATTENTION=0) and the operands are aligned
// (cudnn_sdpa_operands_aligned).
constexpr AttentionPath choose_attention_path(int major, int minor, int head_dim, DType dtype,
                                              bool score_bias = false, bool cudnn = false) {
  if (score_bias) return AttentionPath::kMath;
  if (cudnn && cudnn_sdpa_supported(major, minor, head_dim, dtype)) return AttentionPath::kCudnn;
  return flash_supported(major, minor, head_dim, dtype) ? AttentionPath::kFlash : AttentionPath::kMath;
}

constexpr const char* attention_path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::kFlash: return "flash";
    case AttentionPath::kCudnn: return "cudnn";
    case AttentionPath::kMath: break;
  }
  return "math";
}

}  // namespace ditgen::cuda
