// Sinusoidal timestep embeddings and patch (un)folding on the GPU.
// Timestep embedding: per element the formulas of kernels/math/embedding.h
// (shared with the CPU op); sin/cos are taken in double and rounded once,
// so the result matches the host's sinf/cosf whatever the CUDA math flags.
// Patchify / unpatchify: pure index permutations, one thread per output
// element (coalesced writes), the CPU op's (c, i, j) / (i, j, c) orders.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/embedding.h"

namespace ditgen::cuda {

namespace {

// out [n, dim]: row r = [sin | cos] (or [cos | sin] when flipped) of
// timestep_arg(t[r], freq_j); an odd dim's last column is 0.
template <class T>
__global__ void timestep_embedding_kernel(const float* __restrict__ t, T* __restrict__ out, int64_t n, int64_t dim,
                                          int64_t half, bool flip, float shift, float scale, float neg_log_period) {
  const int64_t total = n * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i - r * half;
    const float arg = math::timestep_arg(t[r], math::timestep_freq(j, half, shift, neg_log_period), scale);
    const float s = static_cast<float>(sin(static_cast<double>(arg)));
    const float c = static_cast<float>(cos(static_cast<double>(arg)));
    T* row = out + r * dim;
    row[j] = from_float<T>(flip ? c : s);
    row[half + j] = from_float<T>(flip ? s : c);
    if (j == 0 && (dim & 1)) row[dim - 1] = from_float<T>(0.0f);
  }
}

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

void timestep_embedding(const float* timesteps, int64_t n, void* out, int64_t dim, bool flip_sin_to_cos,
                        float downscale_freq_shift, float scale, float max_period, DType dtype) {
  if (dim < 1) throw std::invalid_argument("timestep_embedding: dim must be >= 1");
  const int64_t half = dim / 2;
  if (n <= 0) return;
  const float nlp = math::timestep_neg_log_period(max_period);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (half == 0) {  // dim 1: the single column is the zero padding
      DITGEN_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(n) * sizeof(T), stream()));
      return;
    }
    timestep_embedding_kernel<T><<<grid_for(n * half), kThreads, 0, stream()>>>(
        timesteps, static_cast<T*>(out), n, dim, half, flip_sin_to_cos, downscale_freq_shift, scale, nlp);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

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
