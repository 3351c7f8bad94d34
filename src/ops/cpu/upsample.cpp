// Nearest-neighbour upsampling by an integer factor on CPU
// (F.interpolate(mode="nearest", scale_factor=f) for integer f: output pixel
// (y, x) copies input pixel (y / f, x / f)).
// Each input row is widened once into the first of its f output rows, and
// that row is copied to the other f-1: one pass, OpenMP over input rows.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/math/upsample_phases.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

Tensor upsample_nearest(const Tensor& x, int64_t factor) {
  if (x.ndim() != 4) throw std::invalid_argument("upsample_nearest: expected [B, C, H, W], got " + shape_str(x.shape()));
  if (factor < 1) throw std::invalid_argument("upsample_nearest: factor must be >= 1, got " + std::to_string(factor));
  const int64_t B = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t Wo = W * factor;
  Tensor out = Tensor::empty({B, C, H * factor, Wo});  // (B, C, H*f, W*f)
  const float* xd = x.data();
  float* od = out.data();
  // Input row r = (b*C + c)*H + y maps to output rows r*f .. r*f + f-1.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * C * H; ++r) {
    const float* src = xd + r * W;
    float* dst = od + r * factor * Wo;
    if (factor == 2) {
      for (int64_t i = 0; i < W; ++i) dst[2 * i] = dst[2 * i + 1] = src[i];
    } else {
      for (int64_t i = 0; i < W; ++i)
        for (int64_t j = 0; j < factor; ++j) dst[i * factor + j] = src[i];
    }
    for (int64_t j = 1; j < factor; ++j) std::memcpy(dst + j * Wo, dst, Wo * sizeof(float));
  }
  return out;
}

}  // namespace ditgen::ops::cpu

namespace ditgen::ops::cpu {

// Each output row (b, c, yo) reads one row of each of its two column phases
// (py = yo % 2): even columns from phase (py, 0), odd from (py, 1), shifted
// by the phase (kernels/math/upsample_phases.h); OpenMP over output rows.
Tensor interleave_upsample_phases(const Tensor& y) {
  const int64_t B = y.dim(0), C = y.dim(1) / 4, H = y.dim(2) - 1, W = y.dim(3) - 1;
  Tensor out = Tensor::empty({B, C, 2 * H, 2 * W});  // (B, C, 2H, 2W)
  const float* yd = y.data();
  float* od = out.data();
  const int64_t in_item = 4 * C * (H + 1) * (W + 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * C * 2 * H; ++r) {
    const int64_t yo = r % (2 * H), c = (r / (2 * H)) % C, b = r / (2 * H * C);
    const float* even = yd + b * in_item + math::upsample_phase_source(c, yo, 0, C, H, W);
    const float* odd = yd + b * in_item + math::upsample_phase_source(c, yo, 1, C, H, W);
    float* dst = od + r * 2 * W;
    for (int64_t j = 0; j < W; ++j) {
      dst[2 * j] = even[j];
      dst[2 * j + 1] = odd[j];
    }
  }
  return out;
}

}  // namespace ditgen::ops::cpu
