// Rotary position embedding on the CPU: the 3-D tables (float64 angles,
// rounded once, as diffusers' WanRotaryPosEmbed) and their application to
// rows of q or k (kernels/math/rotary.h's rotation, shared with the CUDA
// kernel). Rows are independent: one OpenMP task per block of rows, the
// pairs of a row in one vectorisable loop (stride-2 loads, no gathers).
#include <cmath>
#include <vector>

#include "kernels/math/rotary.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

RotaryTables rotary_tables_3d(std::array<int64_t, 3> dims, std::array<int64_t, 3> grid, double theta) {
  const int64_t head_dim = dims[0] + dims[1] + dims[2];
  const int64_t tokens = grid[0] * grid[1] * grid[2];
  // Per axis, the angle of each (position, pair): cos / sin in float64,
  // rounded once (get_1d_rotary_pos_embed's .float() after repeat_interleave).
  std::vector<float> axis_cos[3], axis_sin[3];
  for (int a = 0; a < 3; ++a) {
    const int64_t d = dims[a], half = d / 2;
    axis_cos[a].resize(static_cast<size_t>(grid[a] * half));
    axis_sin[a].resize(axis_cos[a].size());
    for (int64_t p = 0; p < grid[a]; ++p)
      for (int64_t j = 0; j < half; ++j) {
        const double angle = static_cast<double>(p) * math::rotary_inv_freq(j, d, theta);
        axis_cos[a][p * half + j] = static_cast<float>(std::cos(angle));
        axis_sin[a][p * half + j] = static_cast<float>(std::sin(angle));
      }
  }
  RotaryTables t{Tensor::empty({tokens, head_dim}), Tensor::empty({tokens, head_dim})};
#pragma omp parallel for if (tokens > 256)
  for (int64_t r = 0; r < tokens; ++r) {
    const int64_t pos[3] = {r / (grid[1] * grid[2]), (r / grid[2]) % grid[1], r % grid[2]};
    float* c = t.cos.data() + r * head_dim;
    float* s = t.sin.data() + r * head_dim;
    for (int a = 0; a < 3; ++a) {
      const int64_t half = dims[a] / 2;
      const float* ac = axis_cos[a].data() + pos[a] * half;
      const float* as = axis_sin[a].data() + pos[a] * half;
      for (int64_t j = 0; j < half; ++j) {
        c[2 * j] = c[2 * j + 1] = ac[j];
        s[2 * j] = s[2 * j + 1] = as[j];
      }
      c += dims[a];
      s += dims[a];
    }
  }
  return t;
}

void rotary_embed(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t tokens,
                  int64_t width, const float* cos, const float* sin, int64_t head_dim) {
  if (rows <= 0 || width <= 0) return;
  const int64_t heads = width / head_dim;
#pragma omp parallel for schedule(static) if (rows * width > (int64_t{1} << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % tokens;
    const float* xr = x + r * x_stride;
    float* yr = y + r * y_stride;
    const float* c = cos + t * head_dim;
    const float* s = sin + t * head_dim;
    for (int64_t h = 0; h < heads; ++h) {
      const float* xh = xr + h * head_dim;
      float* yh = yr + h * head_dim;
#pragma omp simd
      for (int64_t j = 0; j < head_dim; j += 2) {
        float y1, y2;
        math::rotary_rotate(xh[j], xh[j + 1], c[j], s[j + 1], y1, y2);
        yh[j] = y1;
        yh[j + 1] = y2;
      }
    }
  }
}

}  // namespace ditgen::ops::cpu
