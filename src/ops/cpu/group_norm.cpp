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
// The apply formula is math::group_norm_apply (kernels/math/norm.h, shared
// with the CUDA kernel). SiLU is math::silu (kernels/math/activations.h): a
// branch-free exp, so the
// loop vectorises; glibc's expf is scalar without -ffast-math and would
// dominate this memory-bound pass.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/math/activations.h"
#include "kernels/math/norm.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

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
  const int64_t S = B > 0 && C > 0 ? x.numel() / (B * C) : 0;  // spatial size per channel
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
          const float y = math::group_norm_apply(xc[i], mean_hi, mean_lo, a, s);
          oc[i] = math::silu(y);
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < S; ++i) oc[i] = math::group_norm_apply(xc[i], mean_hi, mean_lo, a, s);
      }
    }
  }
  return out;
}

}  // namespace ditgen::ops::cpu
