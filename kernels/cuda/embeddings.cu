// Patch (un)folding on the GPU, 2-D and 3-D: pure index permutations, one
// thread per output element (coalesced writes), the CPU ops' (c, i, j) /
// (i, j, c) orders ((c, a, i, j) / (a, i, j, c) in 3-D). (Timestep
// embeddings have no kernel: the DiT computes the few [steps x 256] rows on
// the host and uploads them.)
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

// y [B, f*h*w, C*pt*ph*pw] from x [B, C, f*pt, h*ph, w*pw].
template <class T>
__global__ void patchify3d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t channels, int64_t gf,
                                  int64_t gh, int64_t gw, int64_t pt, int64_t ph, int64_t pw, int64_t total) {
  const int64_t row = channels * pt * ph * pw, tokens = gf * gh * gw;
  const int64_t tt = gf * pt, hh = gh * ph, ww = gw * pw;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i % row, tok = (i / row) % tokens, n = i / (row * tokens);
    const int64_t ch = e / (pt * ph * pw), a = (e / (ph * pw)) % pt, ii = (e / pw) % ph, jj = e % pw;
    const int64_t f = tok / (gh * gw), gy = (tok / gw) % gh, gx = tok % gw;
    y[i] = x[(((n * channels + ch) * tt + f * pt + a) * hh + gy * ph + ii) * ww + gx * pw + jj];
  }
}

// y [B, C, f*pt, h*ph, w*pw] from x [B, f*h*w, pt*ph*pw*C].
template <class T>
__global__ void unpatchify3d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t gf, int64_t gh, int64_t gw,
                                    int64_t pt, int64_t ph, int64_t pw, int64_t channels, int64_t total) {
  const int64_t tt = gf * pt, hh = gh * ph, ww = gw * pw;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t xx = i % ww, yy = (i / ww) % hh, zz = (i / (ww * hh)) % tt;
    const int64_t ch = (i / (ww * hh * tt)) % channels, n = i / (ww * hh * tt * channels);
    const int64_t tok = ((zz / pt) * gh + yy / ph) * gw + xx / pw;
    const int64_t inner = ((zz % pt) * ph + yy % ph) * pw + xx % pw;
    y[i] = x[(n * gf * gh * gw + tok) * pt * ph * pw * channels + inner * channels + ch];
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

void patchify3d(const void* x, void* y, int64_t batch, int64_t channels, std::array<int64_t, 3> size,
                std::array<int64_t, 3> patch, DType dtype) {
  for (int a = 0; a < 3; ++a)
    if (patch[a] < 1 || size[a] % patch[a])
      throw std::invalid_argument("patchify3d: size " + std::to_string(size[a]) + " with patch " +
                                  std::to_string(patch[a]));
  const int64_t total = batch * channels * size[0] * size[1] * size[2];
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    patchify3d_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(
        static_cast<const T*>(x), static_cast<T*>(y), channels, size[0] / patch[0], size[1] / patch[1],
        size[2] / patch[2], patch[0], patch[1], patch[2], total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

void unpatchify3d(const void* x, void* y, int64_t batch, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch,
                  int64_t channels, DType dtype) {
  if (patch[0] < 1 || patch[1] < 1 || patch[2] < 1) throw std::invalid_argument("unpatchify3d: patch must be >= 1");
  const int64_t total = batch * channels * grid[0] * patch[0] * grid[1] * patch[1] * grid[2] * patch[2];
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unpatchify3d_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                       grid[0], grid[1], grid[2], patch[0], patch[1],
                                                                       patch[2], channels, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
