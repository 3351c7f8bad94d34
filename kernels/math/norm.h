// Normalisation formulas shared by the CPU ops and the CUDA kernels
// (DITGEN_HD): LayerNorm's rstd and affine / adaLN modulation, RMSNorm's
// (T5LayerNorm's) rstd and apply, the channel RMS norm's (WanRMS_norm's)
// clamped L2 norm and apply, the adaLN-Zero gated residual, GroupNorm's
// per-channel apply, and mean/variance moments with Chan's parallel combine,
// which lets a GPU reduction split one group over many threads and blocks and
// still centre every partial sum on its own mean (no E[x^2] - E[x]^2
// cancellation).
#pragma once
#include <math.h>

#include "kernels/math/hd.h"

namespace ditgen::math {

// 1 / sqrt(var + eps) from the sum of squared deviations of n values
// (biased variance, as torch's LayerNorm / GroupNorm).
DITGEN_HD float norm_rstd(float sq_dev_sum, float n, float eps) { return 1.0f / sqrtf(sq_dev_sum / n + eps); }

DITGEN_HD float normalize(float x, float mean, float rstd) { return (x - mean) * rstd; }

// RMSNorm (T5LayerNorm): 1 / sqrt(mean(x^2) + eps) from the sum of squares
// of n values; no mean is subtracted.
DITGEN_HD float rms_rstd(float sq_sum, float n, float eps) { return 1.0f / sqrtf(sq_sum / n + eps); }

// weight * (x * rstd), in T5LayerNorm's order (normalise, then scale).
DITGEN_HD float rms_apply(float x, float rstd, float weight) { return weight * (x * rstd); }

// F.normalize's divisor: the L2 norm from a sum of squares, clamped below at
// eps (torch's clamp_min: a NaN stays NaN).
DITGEN_HD float l2_norm_clamped(float sq_sum, float eps) {
  const float n = sqrtf(sq_sum);
  return n < eps ? eps : n;
}

// Channel RMS norm (WanRMS_norm): F.normalize(x) * scale * gamma + bias in
// torch's order, scale = sqrt(C) as a float.
DITGEN_HD float channel_rms_apply(float x, float norm, float scale, float gamma, float bias) {
  return x / norm * scale * gamma + bias;
}

// adaLN: LN(x) * (1 + scale) + shift.
DITGEN_HD float modulate(float xhat, float shift, float scale) { return xhat * (1.0f + scale) + shift; }

// adaLN-Zero residual: x + gate * y.
DITGEN_HD float gated_residual(float x, float gate, float y) { return x + gate * y; }

// GroupNorm apply with the channel's weight folded in (a = w[c] * rstd) and
// the mean given as hi + lo floats, so x - mean stays accurate when |mean| >>
// std (lo = 0 where the mean is only known to float precision).
DITGEN_HD float group_norm_apply(float x, float mean_hi, float mean_lo, float a, float bias) {
  return ((x - mean_hi) - mean_lo) * a + bias;
}

// Count, mean and sum of squared deviations (M2) of a set of values.
struct Moments {
  float n = 0, mean = 0, m2 = 0;
};

// Welford's update with one value.
DITGEN_HD void moments_push(Moments& s, float x) {
  s.n += 1.0f;
  const float d = x - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (x - s.mean);
}

// Chan et al.'s combine of two disjoint sets' moments.
DITGEN_HD Moments moments_combine(const Moments& a, const Moments& b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float fb = b.n / n;
  Moments r;
  r.n = n;
  r.mean = a.mean + d * fb;
  r.m2 = a.m2 + b.m2 + d * d * a.n * fb;
  return r;
}

}  // namespace ditgen::math
