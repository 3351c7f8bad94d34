// LayerNorm on the CPU, plain and fused with adaLN modulation. Rows are
// independent: one OpenMP task per row, two vectorised passes (mean, then
// variance of the centred values, as PyTorch does, for accuracy). The
// per-element formulas are kernels/math/norm.h's, shared with the CUDA ops.
#include <cmath>
#include <stdexcept>

#include "kernels/math/norm.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

namespace {

// mean and 1/sqrt(var + eps) of one row (biased variance, like torch).
inline void row_stats(const float* x, int64_t c, float eps, float& mean, float& rstd) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < c; ++j) s += x[j];
  mean = s / static_cast<float>(c);
  float v = 0;
#pragma omp simd reduction(+ : v)
  for (int64_t j = 0; j < c; ++j) {
    float d = x[j] - mean;
    v += d * d;
  }
  rstd = math::norm_rstd(v, static_cast<float>(c), eps);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps) {
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  if ((weight && weight->numel() != c) || (bias && bias->numel() != c))
    throw std::invalid_argument("layer_norm: affine parameters do not match " + shape_str(x.shape()));
  Tensor y = Tensor::empty(x.shape());
  const float* w = weight ? weight->data() : nullptr;
  const float* b = bias ? bias->data() : nullptr;
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * c;
    float* yr = y.data() + r * c;
    float mean, rstd;
    row_stats(xr, c, eps, mean, rstd);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      float v = math::normalize(xr[j], mean, rstd);
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = v;
    }
  }
  return y;
}

void layer_norm_modulate(const Tensor& x, const float* shift, const float* scale, int64_t mod_stride, float eps,
                         Tensor& out) {
  if (x.ndim() != 3 || out.shape() != x.shape())
    throw std::invalid_argument("layer_norm_modulate: x " + shape_str(x.shape()) + ", out " +
                                shape_str(out.shape()));
  const int64_t b = x.dim(0), n = x.dim(1), c = x.dim(2);
#pragma omp parallel for collapse(2) if (b * n > 16)
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < n; ++t) {
      const float* xr = x.data() + (i * n + t) * c;
      float* yr = out.data() + (i * n + t) * c;
      const float* sh = shift + i * mod_stride;
      const float* sc = scale + i * mod_stride;
      float mean, rstd;
      row_stats(xr, c, eps, mean, rstd);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yr[j] = math::modulate(math::normalize(xr[j], mean, rstd), sh[j], sc[j]);
    }
}

}  // namespace ditgen::ops::cpu
