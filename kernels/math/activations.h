// Per-element math shared by CPU loops and CUDA kernels (DITGEN_HD).
// fast_exp is a Cephes-style expf (range reduction to [-ln2/2, ln2/2], Cephes
// polynomial, 2^n by exponent bits): branch-free so CPU loops vectorise under
// `omp simd` without libmvec, and within ~2 ulp of expf over the float range.
// GELU(tanh) is written as x * sigmoid(2u), identical to 0.5x(1 + tanh(u)) but
// with one exp and no cancellation; the exact GELU uses erff. ReLU lets a NaN through, as torch.relu
// does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"

namespace ditgen::math {

DITGEN_HD float fast_exp(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2.
  x = x < 88.3762626647949f ? x : 88.3762626647949f;
  x = x > -87.3365478515625f ? x : -87.3365478515625f;  // keep 2^n normal
  // Round to nearest (not floor) with the 1.5 * 2^23 trick: plain float
  // arithmetic, so loops vectorise on any ISA (a nearbyintf call does not
  // without AVX-512), and |r| <= ln2/2 keeps the polynomial accurate.
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float fl = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - fl * 0.693359375f;
  r = r - fl * -2.12194440e-4f;
  float r2 = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r2 + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(fl) + 127) << 23;
#if defined(__CUDA_ARCH__)
  return y * __int_as_float(bits);
#else
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
#endif
}

DITGEN_HD float sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

DITGEN_HD float silu(float x) { return x / (1.0f + fast_exp(-x)); }

// max(x, 0), written so that a NaN x stays NaN (torch.relu).
DITGEN_HD float relu(float x) { return x < 0.0f ? 0.0f : x; }

// GELU with the tanh approximation (torch approximate="tanh"):
// 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
DITGEN_HD float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  float u = k * (x + 0.044715f * x * x * x);
  return x / (1.0f + fast_exp(-2.0f * u));
}

// The exact GELU (torch's default, approximate="none"): 0.5 x (1 + erf(x / sqrt 2)).
DITGEN_HD float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

}  // namespace ditgen::math
