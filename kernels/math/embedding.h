// diffusers get_timestep_embedding, per element (DITGEN_HD, so a device
// kernel could share it; today only the host op uses it, every backend
// uploads the host rows):
//   freq_i = exp(-log(max_period) * i / (half - downscale_freq_shift))
//   arg = scale * (t * freq_i); row = [sin(arg) | cos(arg)] (or flipped)
// with torch's float32 steps. The exponential is taken in double and rounded
// once, so host libm and CUDA's exp give the same float (their float expf
// differ by an ulp, which at t ~ 1000 moves the argument by ~1e-4).
#pragma once
#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"

namespace ditgen::math {

// -log(max_period) rounded to float, as torch computes it.
DITGEN_HD float timestep_neg_log_period(float max_period) {
  return static_cast<float>(-log(static_cast<double>(max_period)));
}

DITGEN_HD float timestep_freq(int64_t i, int64_t half, float downscale_freq_shift, float neg_log_period) {
  float exponent = neg_log_period * static_cast<float>(i);
  exponent = exponent / (static_cast<float>(half) - downscale_freq_shift);
  return static_cast<float>(exp(static_cast<double>(exponent)));
}

DITGEN_HD float timestep_arg(float t, float freq, float scale) { return scale * (t * freq); }

}  // namespace ditgen::math
