// Attention entry point on the GPU and the log-sum-exp merge.
// attention() picks cuDNN, flash or math with the pure rule of
// attention_path.h for the bound device, the call's score bias and whether
// cuDNN's attention is usable (or the path forced by --attention; forced
// flash with a bias is refused), so the choice is the same function the CPU
// tests check; a shape cuDNN has no plan for runs the own flash kernel. attention_merge_ is one warp per
// query row: the lane-0 read of both lse values is broadcast, every lane
// merges a strided share of the row's head_dim outputs with
// math::lse_merge (kernels/math/softmax.h, as the CPU op), then lane 0
// writes the merged lse.
#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/softmax.h"

namespace ditgen::cuda {

namespace {

constexpr int kMergeWarps = 8;  // rows per block

// Row r = (b * heads + h) * q_len + i: out row (b, i, head h), lse[r].
template <class T>
__global__ void merge_kernel(T* out, float* lse, const T* __restrict__ out2, const float* __restrict__ lse2,
                             int64_t rows, int64_t heads, int64_t q_len, int64_t head_dim, int64_t row_stride,
                             int64_t batch_stride) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kMergeWarps} + (threadIdx.x >> 5); r < rows;
       r += int64_t{gridDim.x} * kMergeWarps) {
    const int64_t i = r % q_len, bh = r / q_len, h = bh % heads, b = bh / heads;
    float l1 = 0.0f, l2 = 0.0f;
    if (lane == 0) {
      l1 = lse[r];
      l2 = lse2[r];
    }
    l1 = __shfl_sync(0xffffffffu, l1, 0);
    l2 = __shfl_sync(0xffffffffu, l2, 0);
    const math::LseMerge w = math::lse_merge(l1, l2);
    const int64_t off = b * batch_stride + i * row_stride + h * head_dim;
    T* o = out + off;
    const T* o2 = out2 + off;
    for (int64_t e = lane; e < head_dim; e += 32)
      o[e] = from_float<T>(math::lse_merge_value(w, to_float(o[e]), to_float(o2[e])));
    if (lane == 0) lse[r] = w.lse;
  }
}

}  // namespace

AttentionPath attention_path(const AttentionArgs& a, AttentionMode mode) {
  if (mode == AttentionMode::kMath) return AttentionPath::kMath;
  const bool score_bias = a.bias != nullptr;
  if (mode == AttentionMode::kFlash && score_bias)
    throw std::invalid_argument("attention: flash attention takes no score bias (AttentionArgs::bias, T5's relative "
                                "position bias): use --attention math or auto");
  const DeviceInfo& info = current_device_info();
  const int head_dim = static_cast<int>(std::min<int64_t>(a.head_dim, 1 << 20));
  const bool cudnn = !score_bias && cudnn_sdpa_supported(info.major, info.minor, head_dim, a.dtype) &&
                     cudnn_attention_available() && cudnn_sdpa_operands_aligned(a);
  if (mode == AttentionMode::kFlash && !cudnn && !flash_supported(info.major, info.minor, head_dim, a.dtype))
    throw std::invalid_argument("attention: flash attention needs compute capability >= 8.0 and head_dim 64, 72 or "
                                "128; this is " + info.name + " (" + std::to_string(info.major) + "." +
                                std::to_string(info.minor) + ") with head_dim " + std::to_string(a.head_dim) +
                                ": use --attention math or auto");
  const AttentionPath path = choose_attention_path(info.major, info.minor, head_dim, a.dtype, score_bias, cudnn);
  if (path == AttentionPath::kFlash && !flash_image_available()) {
    if (mode == AttentionMode::kFlash)
      throw std::invalid_argument("attention: this build has no sm_80+ image for flash attention on " + info.name +
                                  " (DITGEN_CUDA_ARCHITECTURES): use --attention math or auto");
    return AttentionPath::kMath;
  }
  return path;
}

void attention(const AttentionArgs& a, AttentionMode mode) {
  check_attention_args(a, "attention");
  switch (attention_path(a, mode)) {
    case AttentionPath::kCudnn:
      if (attention_cudnn(a)) return;
      // No cuDNN plan for this shape: the own kernels.
      {
        const DeviceInfo& info = current_device_info();
        if (flash_supported(info.major, info.minor, static_cast<int>(std::min<int64_t>(a.head_dim, 1 << 20)),
                            a.dtype) &&
            flash_image_available())
          attention_flash(a);
        else
          attention_math(a);
      }
      return;
    case AttentionPath::kFlash: attention_flash(a); return;
    case AttentionPath::kMath: attention_math(a); return;
  }
}

void attention_merge_(void* out, float* lse, const void* out2, const float* lse2, int64_t batch, int64_t heads,
                      int64_t q_len, int64_t head_dim, int64_t row_stride, int64_t batch_stride, DType dtype) {
  const int64_t rows = batch * heads * q_len;
  if (rows <= 0 || head_dim <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    merge_kernel<T><<<grid_for(rows, kMergeWarps), kMergeWarps * 32, 0, stream()>>>(
        static_cast<T*>(out), lse, static_cast<const T*>(out2), lse2, rows, heads, q_len, head_dim, row_stride,
        batch_stride);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
