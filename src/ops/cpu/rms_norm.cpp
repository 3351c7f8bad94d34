// RMSNorm (T5LayerNorm) on the CPU: y = weight * (x / sqrt(mean(x^2) + eps))
// over the last dim, with no mean subtracted and no bias. Rows are
// independent: one OpenMP task per row, one vectorised pass for the sum of
// squares and one for the output. The sum of squares is blocked (vector-lane
// partial sums over blocks of kSumBlock values, then the block sums added), so
// its rounding error grows with the block, not with the row: a 4096-channel
// row (T5-XXL) sums as accurately as a 256-channel one. The formulas are
// kernels/math/norm.h's, shared with the CUDA kernel.
#include <algorithm>

#include "kernels/math/norm.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

namespace {

constexpr int64_t kSumBlock = 256;

float sum_of_squares(const float* x, int64_t c) {
  float total = 0.0f;
  for (int64_t j0 = 0; j0 < c; j0 += kSumBlock) {
    const int64_t j1 = std::min(c, j0 + kSumBlock);
    float block = 0.0f;
#pragma omp simd reduction(+ : block)
    for (int64_t j = j0; j < j1; ++j) block += x[j] * x[j];
    total += block;
  }
  return total;
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  const int64_t c = x.dim(-1), rows = c > 0 ? x.numel() / c : 0;
  Tensor y = Tensor::empty(x.shape());
  const float* w = weight.data();
#pragma omp parallel for if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * c;
    float* yr = y.data() + r * c;
    const float rstd = math::rms_rstd(sum_of_squares(xr, c), static_cast<float>(c), eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) yr[j] = math::rms_apply(xr[j], rstd, w[j]);
  }
  return y;
}

}  // namespace ditgen::ops::cpu
