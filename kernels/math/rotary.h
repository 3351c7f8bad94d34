// Rotary position embedding, per element (DITGEN_HD: the CPU op and the CUDA
// kernel share it), as diffusers' Wan attention applies it: real cos / sin
// tables whose angle is repeated over each pair of channels, pairs
// interleaved (x[2i], x[2i+1]), the rotation in float32 (torch rounds each
// product on its own; a compiler that fuses one into the add or subtract is
// an ulp apart). The table angles are float64 as diffusers builds them
// (get_1d_rotary_pos_embed with freqs_dtype float64), rounded once.
#pragma once
#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"

namespace ditgen::math {

// Pair j's frequency on an axis of d channels: 1 / theta^((2j) / d), in
// float64 (torch.arange(0, d, 2, float64) / d, then theta ** that, then 1.0 / that).
DITGEN_HD double rotary_inv_freq(int64_t j, int64_t d, double theta) {
  return 1.0 / pow(theta, static_cast<double>(2 * j) / static_cast<double>(d));
}

// (x1, x2) rotated by the angle whose cosine is c and sine s:
// (x1 c - x2 s, x1 s + x2 c).
DITGEN_HD void rotary_rotate(float x1, float x2, float c, float s, float& y1, float& y2) {
  const float a = x1 * c, b = x2 * s, e = x1 * s, f = x2 * c;
  y1 = a - b;
  y2 = e + f;
}

}  // namespace ditgen::math
