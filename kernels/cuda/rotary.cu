// Rotary position embedding on the GPU (ops::rotary_embed_ / rotary_embed /
// rotary_embed_rows_): one thread per interleaved pair (x[2i], x[2i+1]) of a
// row, rotated in float32 by its token's table entries (cos[2i], sin[2i+1],
// float32 tables whatever x's dtype) and rounded once to the storage type.
// Rows may be strided (q or k inside packed q|k|v rows) and y may be x (in
// place: each thread reads its pair before writing it). Formula:
// kernels/math/rotary.h, shared with the CPU.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/rotary.h"

namespace ditgen::cuda {

namespace {

template <class T>
__global__ void rotary_kernel(const T* x, int64_t x_stride, T* y, int64_t y_stride, int64_t tokens, int64_t width,
                              const float* __restrict__ cos, const float* __restrict__ sin, int64_t head_dim,
                              int64_t total) {
  const int64_t row_pairs = width / 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / row_pairs, col = 2 * (i - r * row_pairs);
    const int64_t j = col % head_dim, t = r % tokens;
    const T* xr = x + r * x_stride + col;
    float y1, y2;
    math::rotary_rotate(to_float(xr[0]), to_float(xr[1]), cos[t * head_dim + j], sin[t * head_dim + j + 1], y1, y2);
    T* yr = y + r * y_stride + col;
    yr[0] = from_float<T>(y1);
    yr[1] = from_float<T>(y2);
  }
}

}  // namespace

void rotary_embed(const void* x, int64_t x_stride, void* y, int64_t y_stride, int64_t rows, int64_t tokens,
                  int64_t width, const float* cos, const float* sin, int64_t head_dim, DType dtype) {
  if (head_dim <= 0 || head_dim % 2 || width % head_dim || tokens <= 0)
    throw std::invalid_argument("rotary_embed: rows of " + std::to_string(width) + " with head_dim " +
                                std::to_string(head_dim) + ", " + std::to_string(tokens) + " tokens");
  const int64_t total = rows * (width / 2);
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotary_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<const T*>(x), x_stride,
                                                                 static_cast<T*>(y), y_stride, tokens, width, cos,
                                                                 sin, head_dim, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
