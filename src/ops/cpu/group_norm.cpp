// GroupNorm (+ optional SiLU) on CPU, torch.nn.GroupNorm semantics.
//
// x [B, C, *] is viewed as B*groups contiguous blocks of (C/groups)*S values
// (S = product of the trailing dims). Each block is one OpenMP work item:
// mean, then the biased variance around it, both accumulated in double (the
// two-pass form: no cancellation when |mean| >> std, as in VAE feature maps),
// then one fused pass per channel: y = (x - mean) * (w[c] * rstd) + b[c],
// followed by SiLU when asked (the VAE always pairs them, and fusing saves a
// full read+write of the feature map).
//
// SiLU uses a branch-free exp (Cephes polynomial, ~1 ulp) so the loop
// vectorises; glibc's expf is scalar without -ffast-math and would dominate
// this memory-bound pass.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ops/ops.h"

namespace ditgen::ops {
namespace {

// exp(x), relative error ~1e-7 over the float range; inputs are clamped so
// the result stays finite and normal (silu only needs that much).
inline float exp_vec(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);  // round(x / ln 2)
  // Cody-Waite: r = x - n ln2 in two parts, exact to float precision.
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu) {
  if (x.ndim() < 2) throw std::invalid_argument("group_norm: expected [B, C, *], got " + shape_str(x.shape()));
  const int64_t B = x.dim(0), C = x.dim(1);
  if (groups < 1 || C % groups != 0)
    throw std::invalid_argument("group_norm: " + std::to_string(C) + " channels not divisible into " +
                                std::to_string(groups) + " groups");
  if (weight.numel() != C || bias.numel() != C)
    throw std::invalid_argument("group_norm: weight " + shape_str(weight.shape()) + " / bias " +
                                shape_str(bias.shape()) + " for " + std::to_string(C) + " channels");
  const int64_t S = C ? x.numel() / (B * C) : 0;  // spatial size per channel
  const int64_t cpg = C / groups;
  const int64_t block = cpg * S;

  Tensor out = Tensor::empty(x.shape());  // same shape as x
  const float* xd = x.data();
  float* od = out.data();
  const float* wd = weight.data();
  const float* bd = bias.data();

#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < B * groups; ++bg) {
    const float* xs = xd + bg * block;
    float* os = od + bg * block;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < block; ++i) sum += xs[i];
    const double mean = block ? sum / static_cast<double>(block) : 0.0;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < block; ++i) {
      const double d = static_cast<double>(xs[i]) - mean;
      sq += d * d;
    }
    const double var = block ? sq / static_cast<double>(block) : 0.0;  // biased, as PyTorch
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));

    // y = (x - mean) * (w * rstd) + b, with mean split into two floats so
    // x - mean stays exact when |mean| >> std (the folded form
    // x * a + (b - mean * a) cancels catastrophically there).
    const float mean_hi = static_cast<float>(mean);
    const float mean_lo = static_cast<float>(mean - mean_hi);
    const int64_t c0 = (bg % groups) * cpg;
    for (int64_t c = 0; c < cpg; ++c) {
      const float a = static_cast<float>(wd[c0 + c] * rstd);
      const float s = bd[c0 + c];
      const float* xc = xs + c * S;
      float* oc = os + c * S;
      if (fuse_silu) {
#pragma omp simd
        for (int64_t i = 0; i < S; ++i) {
          const float y = ((xc[i] - mean_hi) - mean_lo) * a + s;
          oc[i] = y / (1.0f + exp_vec(-y));
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < S; ++i) oc[i] = ((xc[i] - mean_hi) - mean_lo) * a + s;
      }
    }
  }
  return out;
}

}  // namespace ditgen::ops
