// Nearest-neighbour upsampling by an integer factor on the GPU
// (F.interpolate(mode="nearest", scale_factor=f)): output pixel (y, x) copies
// input pixel (y / f, x / f). One thread per output element, so writes are
// coalesced; the repeated input reads hit the cache. The phase interleave
// of an upsampling convolution (kernels/math/upsample_phases.h) likewise.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/upsample_phases.h"

namespace ditgen::cuda {

namespace {

template <class T>
__global__ void upsample_nearest_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t height, int64_t width,
                                        int64_t factor, int64_t total) {
  const int64_t wo = width * factor, ho = height * factor;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t xo = i % wo, t = i / wo, yo = t % ho, bc = t / ho;
    y[i] = x[(bc * height + yo / factor) * width + xo / factor];
  }
}

template <class T>
__global__ void interleave_upsample_phases_kernel(const T* __restrict__ y, T* __restrict__ out, int64_t channels,
                                                  int64_t height, int64_t width, int64_t total) {
  const int64_t wo = 2 * width, ho = 2 * height, per_item = channels * ho * wo;
  const int64_t in_item = 4 * channels * (height + 1) * (width + 1);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / per_item, r = i % per_item, xo = r % wo, t = r / wo, yo = t % ho, c = t / ho;
    out[i] = y[b * in_item + math::upsample_phase_source(c, yo, xo, channels, height, width)];
  }
}

}  // namespace

void interleave_upsample_phases(const void* y, void* out, int64_t batch, int64_t channels, int64_t height,
                                int64_t width, DType dtype) {
  const int64_t total = batch * channels * 4 * height * width;
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    interleave_upsample_phases_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(
        static_cast<const T*>(y), static_cast<T*>(out), channels, height, width, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

void upsample_nearest(const void* x, void* y, int64_t batch, int64_t channels, int64_t height, int64_t width,
                      int64_t factor, DType dtype) {
  if (factor < 1) throw std::invalid_argument("upsample_nearest: factor must be >= 1, got " + std::to_string(factor));
  const int64_t total = batch * channels * height * factor * width * factor;
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    upsample_nearest_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<const T*>(x),
                                                                           static_cast<T*>(y), height, width, factor,
                                                                           total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
