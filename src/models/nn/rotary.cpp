// The rotary table on the device and its hook; CogVideoX's float32 axis.
#include "models/nn/rotary.h"

#include <cmath>

namespace ditgen::models::nn {

RotaryTable::RotaryTable(const ops::RotaryTables& host, const Placement& place)
    : cos_(host.cos.to(place.device, DType::kF32)), sin_(host.sin.to(place.device, DType::kF32)) {}

Rotary RotaryTable::rows_from(int64_t first) const {
  return [this, first](Tensor& q, Tensor& k) {
    ops::rotary_embed_(q, cos_, sin_, first);
    ops::rotary_embed_(k, cos_, sin_, first);
  };
}

void rotary_axis_f32(float pos, int64_t dim, float* cos_out, float* sin_out) {
  for (int64_t k = 0; k < dim / 2; ++k) {
    const float exponent = static_cast<float>(2 * k) / static_cast<float>(dim);
    const float freq = 1.0f / std::pow(10000.0f, exponent);
    const float angle = pos * freq;
    cos_out[2 * k] = cos_out[2 * k + 1] = std::cos(angle);
    sin_out[2 * k] = sin_out[2 * k + 1] = std::sin(angle);
  }
}

}  // namespace ditgen::models::nn
