// Channel RMS norm on the GPU (ops::rms_norm_channels, diffusers'
// WanRMS_norm): for each position s of x [B, C, S], y = x / max(||x[b, :,
// s]||_2, 1e-12) * sqrt(C) * gamma[c] + bias[c], then SiLU when asked. One
// thread per position walks its C channels twice (the float32 sum of
// squares, then the output); neighbouring threads hold neighbouring
// positions, so every load and store of a warp is coalesced. Formulas:
// kernels/math/norm.h and activations.h, shared with the CPU.
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/activations.h"
#include "kernels/math/norm.h"

namespace ditgen::cuda {

namespace {

constexpr float kNormEps = 1e-12f;  // F.normalize's default

template <class T, bool kSilu>
__global__ void rms_norm_channels_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                         const T* __restrict__ bias, T* __restrict__ y, int64_t channels,
                                         int64_t spatial, float scale, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / spatial, s = i - b * spatial;
    const T* xs = x + b * channels * spatial + s;
    T* ys = y + b * channels * spatial + s;
    float sq = 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
      const float v = to_float(xs[c * spatial]);
      sq += v * v;
    }
    const float norm = math::l2_norm_clamped(sq, kNormEps);
    for (int64_t c = 0; c < channels; ++c) {
      float o = math::channel_rms_apply(to_float(xs[c * spatial]), norm, scale, to_float(gamma[c]),
                                        bias ? to_float(bias[c]) : 0.0f);
      if constexpr (kSilu) o = math::silu(o);
      ys[c * spatial] = from_float<T>(o);
    }
  }
}

}  // namespace

void rms_norm_channels(const void* x, const void* gamma, const void* bias, void* y, int64_t batch, int64_t channels,
                       int64_t spatial, bool fuse_silu, DType dtype) {
  const int64_t total = batch * spatial;
  if (total <= 0 || channels <= 0) return;
  if (!gamma) throw std::invalid_argument("rms_norm_channels: gamma is required");
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(channels)));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* xt = static_cast<const T*>(x);
    const auto* gt = static_cast<const T*>(gamma);
    const auto* bt = static_cast<const T*>(bias);
    auto* yt = static_cast<T*>(y);
    if (fuse_silu)
      rms_norm_channels_kernel<T, true>
          <<<grid_for(total), kThreads, 0, stream()>>>(xt, gt, bt, yt, channels, spatial, scale, total);
    else
      rms_norm_channels_kernel<T, false>
          <<<grid_for(total), kThreads, 0, stream()>>>(xt, gt, bt, yt, channels, spatial, scale, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
