// RMSNorm (T5LayerNorm) on the GPU: y = weight * (x / sqrt(mean(x^2) + eps))
// over the last dim, no mean subtracted, no bias. One warp per row, as
// LayerNorm (rows are independent and C is a few thousand at most): one pass
// for the float32 sum of squares (each lane sums a strided share, then the
// warp's shuffle tree), one for the output, whose re-read hits L1/L2.
// Formulas from kernels/math/norm.h, shared with the CPU.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/norm.h"

namespace ditgen::cuda {

namespace {

constexpr int kRowsPerBlock = 4;  // warps per block, one row each

template <class T>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                                int64_t rows, int64_t channels, float eps) {
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5); row < rows;
       row += int64_t{gridDim.x} * kRowsPerBlock) {
    const T* xr = x + row * channels;
    T* yr = y + row * channels;
    float sq = 0.0f;
    for (int64_t j = lane; j < channels; j += 32) {
      const float v = to_float(xr[j]);
      sq += v * v;
    }
    const float rstd = math::rms_rstd(warp_sum(sq), static_cast<float>(channels), eps);
    for (int64_t j = lane; j < channels; j += 32)
      yr[j] = from_float<T>(math::rms_apply(to_float(xr[j]), rstd, to_float(weight[j])));
  }
}

}  // namespace

void rms_norm(const void* x, const void* weight, void* y, int64_t rows, int64_t channels, float eps, DType dtype) {
  if (rows <= 0 || channels <= 0) return;
  if (!weight) throw std::invalid_argument("rms_norm: weight is required");
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_kernel<T><<<grid_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<T*>(y), rows, channels, eps);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
