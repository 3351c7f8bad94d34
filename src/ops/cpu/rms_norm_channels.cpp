// Channel RMS norm on the CPU (diffusers' WanRMS_norm): for each position of
// x [B, C, S], y = x / max(||x[:, s]||_2, 1e-12) * sqrt(C) * gamma[c] +
// bias[c], then SiLU when asked. The reduction runs across channels, which
// lie S apart: positions are taken in blocks of kBlock, whose sums of squares
// build up channel by channel in a small array (contiguous loads, one vector
// lane per position, channels summed in order as torch's strided reduction
// does), then one fused pass writes the block. One OpenMP task per (sample,
// block). Formulas: kernels/math/norm.h, shared with the CUDA kernel.
#include <algorithm>
#include <cmath>

#include "kernels/math/activations.h"
#include "kernels/math/norm.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

namespace {
constexpr int64_t kBlock = 256;
constexpr float kNormEps = 1e-12f;  // F.normalize's default
}  // namespace

Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu) {
  const int64_t B = x.dim(0), C = x.dim(1), S = B > 0 && C > 0 ? x.numel() / (B * C) : 0;
  Tensor y = Tensor::empty(x.shape());
  if (y.numel() == 0) return y;
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  const float* g = gamma.data();
  const float* bs = bias ? bias->data() : nullptr;
  const int64_t blocks = (S + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t s0 = blk * kBlock, n = std::min(kBlock, S - s0);
      const float* xb = x.data() + b * C * S + s0;
      float* yb = y.data() + b * C * S + s0;
      alignas(64) float norm[kBlock];
      for (int64_t i = 0; i < n; ++i) norm[i] = 0.0f;
      for (int64_t c = 0; c < C; ++c) {
        const float* xc = xb + c * S;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) norm[i] += xc[i] * xc[i];
      }
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) norm[i] = math::l2_norm_clamped(norm[i], kNormEps);
      for (int64_t c = 0; c < C; ++c) {
        const float* xc = xb + c * S;
        float* yc = yb + c * S;
        const float gc = g[c], bc = bs ? bs[c] : 0.0f;
        if (fuse_silu) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) yc[i] = math::silu(math::channel_rms_apply(xc[i], norm[i], scale, gc, bc));
        } else {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) yc[i] = math::channel_rms_apply(xc[i], norm[i], scale, gc, bc);
        }
      }
    }
  return y;
}

}  // namespace ditgen::ops::cpu
