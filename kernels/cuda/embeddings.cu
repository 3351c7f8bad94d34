// Patch (un)folding on the GPU: pure index permutations, one thread per
// output element (coalesced writes), the CPU op's (c, i, j) / (i, j, c)
// orders. (Timestep embeddings have no kernel: the DiT computes the few
// [steps x 256] rows on the host and uploads them.)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

// y [B, gh*gw, C*p*p] from x [B, C, gh*p, gw*p].
template <class T>
__global__ void patchify_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t channels, int64_t gh, int64_t gw,
                                int64_t p, int64_t total) {
  const int64_t row = channels * p * p, tokens = gh * gw, width = gw * p, height = gh * p;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i % row, tok = (i / row) % tokens, n = i / (row * tokens);
    const int64_t ch = e / (p * p), ii = (e / p) % p, jj = e % p;
    const int64_t gy = tok / gw, gx = tok % gw;
    y[i] = x[((n * channels + ch) * height + gy * p + ii) * width + gx * p + jj];
  }
}

// y [B, C, h*p, w*p] from x [B, h*w, p*p*C].
template <class T>
__global__ void unpatchify_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t h, int64_t w, int64_t p,
                                  int64_t channels, int64_t total) {
  const int64_t hh = h * p, ww = w * p;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t xx = i % ww, yy = (i / ww) % hh, ch = (i / (ww * hh)) % channels, n = i / (ww * hh * channels);
    const int64_t tok = (yy / p) * w + xx / p, ii = yy % p, jj = xx % p;
    y[i] = x[(n * h * w + tok) * p * p * channels + (ii * p + jj) * channels + ch];
  }
}

}  // namespace

void patchify(const void* x, void* y, int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t p,
              DType dtype) {
  if (p < 1 || height % p || width % p)
    throw std::invalid_argument("patchify: " + std::to_string(height) + "x" + std::to_string(width) +
                                " image with patch " + std::to_string(p));
  const int64_t total = batch * channels * height * width;
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    patchify_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                   channels, height / p, width / p, p, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

void unpatchify(const void* x, void* y, int64_t batch, int64_t h, int64_t w, int64_t p, int64_t channels,
                DType dtype) {
  if (p < 1) throw std::invalid_argument("unpatchify: patch must be >= 1");
  const int64_t total = batch * channels * h * p * w * p;
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unpatchify_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                     h, w, p, channels, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
