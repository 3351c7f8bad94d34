// Elementwise ops on the CPU: one OpenMP-parallel, vectorised pass each, using
// the per-element formulas of kernels/math/activations.h and norm.h (shared
// with the CUDA kernels).
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/math/activations.h"
#include "kernels/math/norm.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;  // below this a parallel region costs more than it saves

// x[i] = f(x[i]).
template <class F>
void map_(Tensor& x, F f) {
  float* p = x.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
}

// x[i] = f(x[i], y[i]) for x and y of one shape; `name` heads the error.
template <class F>
void zip_(Tensor& x, const Tensor& y, const char* name, F f) {
  if (x.shape() != y.shape())
    throw std::invalid_argument(std::string(name) + ": shapes " + shape_str(x.shape()) + " and " +
                                shape_str(y.shape()));
  float* p = x.data();
  const float* q = y.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], q[i]);
}
}  // namespace

void silu_(Tensor& x) {
  map_(x, [](float v) { return math::silu(v); });
}

Tensor silu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  const float* s = x.data();
  float* d = y.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) d[i] = math::silu(s[i]);
  return y;
}

void gelu_tanh_(Tensor& x) {
  map_(x, [](float v) { return math::gelu_tanh(v); });
}

void gelu_(Tensor& x) {
  map_(x, [](float v) { return math::gelu(v); });
}

void relu_(Tensor& x) {
  map_(x, [](float v) { return math::relu(v); });
}

void add_(Tensor& x, const Tensor& y) {
  zip_(x, y, "add_", [](float a, float b) { return a + b; });
}

void mul_(Tensor& x, const Tensor& y) {
  zip_(x, y, "mul_", [](float a, float b) { return a * b; });
}

void add_broadcast_(Tensor& x, const Tensor& y) {
  const int64_t n = y.numel(), rows = n ? x.numel() / n : 0;
  float* p = x.data();
  const float* b = y.data();
#pragma omp parallel for if (rows * n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) p[r * n + j] += b[j];
}

void gated_residual_(Tensor& x, const Tensor& y, const float* gate, int64_t gate_stride) {
  if (x.shape() != y.shape() || x.ndim() != 3)
    throw std::invalid_argument("gated_residual_: shapes " + shape_str(x.shape()) + " and " + shape_str(y.shape()));
  const int64_t b = x.dim(0), n = x.dim(1), c = x.dim(2);
  float* xd = x.data();
  const float* yd = y.data();
#pragma omp parallel for collapse(2) if (x.numel() > kParallelMin)
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < n; ++t) {
      const float* g = gate + i * gate_stride;
      float* xr = xd + (i * n + t) * c;
      const float* yr = yd + (i * n + t) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) xr[j] = math::gated_residual(xr[j], g[j], yr[j]);
    }
}

void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t row_len) {
  if (src_stride == row_len && dst_stride == row_len) {
    std::memmove(dst, src, static_cast<size_t>(rows * row_len) * sizeof(float));
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    std::memmove(dst + r * dst_stride, src + r * src_stride, static_cast<size_t>(row_len) * sizeof(float));
}

}  // namespace ditgen::ops::cpu
