// Nearest-neighbour upsampling by an integer factor on the GPU
// (F.interpolate(mode="nearest", scale_factor=f)): output pixel (y, x) copies
// input pixel (y / f, x / f). One thread per output element, so writes are
// coalesced; the repeated input reads hit the cache.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"

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

}  // namespace

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
