// Elementwise ops on the GPU: one grid-stride kernel each, reading the
// storage type, computing in float32 with the formulas of
// kernels/math/activations.h and norm.h (the CPU ops use the same ones), and
// rounding once on the store. Memory-bound; int64 indices throughout.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/activations.h"
#include "kernels/math/norm.h"

namespace ditgen::cuda {

namespace {

enum class Unary { kSilu, kGeluTanh, kGelu, kRelu };

template <Unary U>
__device__ __forceinline__ float apply(float v) {
  if constexpr (U == Unary::kSilu) return math::silu(v);
  if constexpr (U == Unary::kGeluTanh) return math::gelu_tanh(v);
  if constexpr (U == Unary::kGelu) return math::gelu(v);
  return math::relu(v);
}

template <class T, Unary U>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(apply<U>(to_float(x[i])));
}

enum class Binary { kAdd, kMul };

// x[i] = x[i] + y[i] / x[i] * y[i]
template <class T, Binary B>
__global__ void binary_kernel(T* x, const T* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float a = to_float(x[i]), b = to_float(y[i]);
    x[i] = from_float<T>(B == Binary::kAdd ? a + b : a * b);
  }
}

// x[b, t, c] += gate[b * gate_stride + c] * y[b, t, c]
template <class T>
__global__ void gated_residual_kernel(T* x, const T* __restrict__ y, const T* __restrict__ gate, int64_t gate_stride,
                                      int64_t tokens, int64_t channels, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % channels, b = i / (channels * tokens);
    x[i] = from_float<T>(math::gated_residual(to_float(x[i]), to_float(gate[b * gate_stride + c]), to_float(y[i])));
  }
}

// x[r, j] += y[j] for r < rows, j < n (a bias or position table repeated).
template <class T>
__global__ void add_broadcast_kernel(T* x, const T* __restrict__ y, int64_t n, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) + to_float(y[i % n]));
}

template <class S, class D>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<D>(to_float(x[i]));
}

template <Unary U>
void unary(const void* x, void* y, int64_t n, DType dtype) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_kernel<T, U><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

template <Binary B>
void binary(void* x, const void* y, int64_t n, DType dtype) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<T, B><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<T*>(x), static_cast<const T*>(y), n);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void silu(const void* x, void* y, int64_t n, DType dtype) { unary<Unary::kSilu>(x, y, n, dtype); }

void gelu_tanh(const void* x, void* y, int64_t n, DType dtype) { unary<Unary::kGeluTanh>(x, y, n, dtype); }

void gelu(const void* x, void* y, int64_t n, DType dtype) { unary<Unary::kGelu>(x, y, n, dtype); }

void relu(const void* x, void* y, int64_t n, DType dtype) { unary<Unary::kRelu>(x, y, n, dtype); }

void add_(void* x, const void* y, int64_t n, DType dtype) { binary<Binary::kAdd>(x, y, n, dtype); }

void mul_(void* x, const void* y, int64_t n, DType dtype) { binary<Binary::kMul>(x, y, n, dtype); }

void gated_residual_(void* x, const void* y, const void* gate, int64_t gate_stride, int64_t batch, int64_t tokens,
                     int64_t channels, DType dtype) {
  const int64_t n = batch * tokens * channels;
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gated_residual_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(
        static_cast<T*>(x), static_cast<const T*>(y), static_cast<const T*>(gate), gate_stride, tokens, channels, n);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

void add_broadcast_(void* x, const void* y, int64_t rows, int64_t n, DType dtype) {
  const int64_t total = rows * n;
  if (total <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_broadcast_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<T*>(x),
                                                                          static_cast<const T*>(y), n, total);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

void cast(const void* x, DType x_dtype, void* y, DType y_dtype, int64_t n) {
  if (n <= 0) return;
  dispatch_dtype(x_dtype, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    dispatch_dtype(y_dtype, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      cast_kernel<S, D><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<const S*>(x), static_cast<D*>(y), n);
      DITGEN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ditgen::cuda
