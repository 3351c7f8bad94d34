// Sinusoidal embeddings and patch (un)folding (2-D and 3-D: pure index
// permutations), following diffusers' formulas and float precision:
// timestep embeddings in float32 (as torch computes them, per element as
// kernels/math/embedding.h; every backend uses this host op, the DiT uploads
// its few rows), 2-D position embeddings in float64 then rounded (as
// diffusers does).
#include <cmath>
#include <stdexcept>

#include "kernels/math/embedding.h"
#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {

Tensor timestep_embedding(const std::vector<float>& timesteps, int64_t dim, bool flip_sin_to_cos,
                          float downscale_freq_shift, float scale, float max_period) {
  const int64_t half = dim / 2;
  const int64_t n = static_cast<int64_t>(timesteps.size());
  std::vector<float> freq(half);
  const float neg_log_period = math::timestep_neg_log_period(max_period);
  for (int64_t i = 0; i < half; ++i) freq[i] = math::timestep_freq(i, half, downscale_freq_shift, neg_log_period);
  Tensor out = Tensor::zeros({n, dim});
  for (int64_t r = 0; r < n; ++r) {
    float* row = out.data() + r * dim;
    for (int64_t i = 0; i < half; ++i) {
      const float arg = math::timestep_arg(timesteps[r], freq[i], scale);
      const float s = std::sin(arg), c = std::cos(arg);
      row[i] = flip_sin_to_cos ? c : s;
      row[half + i] = flip_sin_to_cos ? s : c;
    }
  }
  return out;
}

Tensor sincos_pos_embed_2d(int64_t dim, int64_t grid_h, int64_t grid_w, double base_size,
                           double interpolation_scale) {
  if (dim % 4 != 0) throw std::invalid_argument("sincos_pos_embed_2d: dim must be divisible by 4");
  const int64_t quarter = dim / 4;  // each axis gets dim/2 = sin + cos halves
  std::vector<double> omega(quarter);
  for (int64_t i = 0; i < quarter; ++i)
    omega[i] = 1.0 / std::pow(10000.0, static_cast<double>(i) / (static_cast<double>(dim) / 4.0));
  // Positions are float32 in diffusers: arange / (grid / base_size) / interpolation_scale.
  auto position = [&](int64_t idx, int64_t grid) {
    float p = static_cast<float>(idx) / static_cast<float>(static_cast<double>(grid) / base_size);
    return static_cast<double>(p / static_cast<float>(interpolation_scale));
  };
  Tensor out = Tensor::empty({grid_h * grid_w, dim});
  for (int64_t y = 0; y < grid_h; ++y)
    for (int64_t x = 0; x < grid_w; ++x) {
      float* row = out.data() + (y * grid_w + x) * dim;
      // First half embeds the column (w) coordinate, second half the row
      // (h): diffusers' meshgrid(grid_w, grid_h, indexing="xy").
      const double px = position(x, grid_w), py = position(y, grid_h);
      for (int64_t i = 0; i < quarter; ++i) {
        row[i] = static_cast<float>(std::sin(px * omega[i]));
        row[quarter + i] = static_cast<float>(std::cos(px * omega[i]));
        row[2 * quarter + i] = static_cast<float>(std::sin(py * omega[i]));
        row[3 * quarter + i] = static_cast<float>(std::cos(py * omega[i]));
      }
    }
  return out;
}

Tensor patchify(const Tensor& x, int64_t p) {
  if (x.ndim() != 4 || x.dim(2) % p || x.dim(3) % p)
    throw std::invalid_argument("patchify: " + shape_str(x.shape()) + " with patch " + std::to_string(p));
  const int64_t b = x.dim(0), c = x.dim(1), hh = x.dim(2), ww = x.dim(3);
  const int64_t gh = hh / p, gw = ww / p, row = c * p * p;
  Tensor y = Tensor::empty({b, gh * gw, row});
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t gy = 0; gy < gh; ++gy)
      for (int64_t gx = 0; gx < gw; ++gx) {
        float* dst = y.data() + (n * gh * gw + gy * gw + gx) * row;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < p; ++i)
            for (int64_t j = 0; j < p; ++j)
              *dst++ = x.data()[((n * c + ch) * hh + gy * p + i) * ww + gx * p + j];
      }
  return y;
}

Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels) {
  if (x.ndim() != 3 || x.dim(1) != h * w || x.dim(2) != p * p * channels)
    throw std::invalid_argument("unpatchify: " + shape_str(x.shape()));
  const int64_t b = x.dim(0), hh = h * p, ww = w * p;
  Tensor y = Tensor::empty({b, channels, hh, ww});
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t gy = 0; gy < h; ++gy)
      for (int64_t gx = 0; gx < w; ++gx) {
        const float* src = x.data() + (n * h * w + gy * w + gx) * p * p * channels;
        for (int64_t i = 0; i < p; ++i)
          for (int64_t j = 0; j < p; ++j)
            for (int64_t ch = 0; ch < channels; ++ch)
              y.data()[((n * channels + ch) * hh + gy * p + i) * ww + gx * p + j] = *src++;
      }
  return y;
}

Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch) {
  const int64_t b = x.dim(0), c = x.dim(1), tt = x.dim(2), hh = x.dim(3), ww = x.dim(4);
  const int64_t pt = patch[0], ph = patch[1], pw = patch[2];
  const int64_t gf = tt / pt, gh = hh / ph, gw = ww / pw, row = c * pt * ph * pw;
  Tensor y = Tensor::empty({b, gf * gh * gw, row});
  const float* xd = x.data();
#pragma omp parallel for collapse(3)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t f = 0; f < gf; ++f)
      for (int64_t gy = 0; gy < gh; ++gy)
        for (int64_t gx = 0; gx < gw; ++gx) {
          float* dst = y.data() + ((n * gf + f) * gh * gw + gy * gw + gx) * row;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t a = 0; a < pt; ++a)
              for (int64_t i = 0; i < ph; ++i) {
                const float* src = xd + (((n * c + ch) * tt + f * pt + a) * hh + gy * ph + i) * ww + gx * pw;
                for (int64_t j = 0; j < pw; ++j) *dst++ = src[j];
              }
        }
  return y;
}

Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels) {
  const int64_t b = x.dim(0), gf = grid[0], gh = grid[1], gw = grid[2];
  const int64_t pt = patch[0], ph = patch[1], pw = patch[2];
  const int64_t tt = gf * pt, hh = gh * ph, ww = gw * pw, row = pt * ph * pw * channels;
  Tensor y = Tensor::empty({b, channels, tt, hh, ww});
  float* yd = y.data();
#pragma omp parallel for collapse(3)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t f = 0; f < gf; ++f)
      for (int64_t gy = 0; gy < gh; ++gy)
        for (int64_t gx = 0; gx < gw; ++gx) {
          const float* src = x.data() + ((n * gf + f) * gh * gw + gy * gw + gx) * row;
          for (int64_t a = 0; a < pt; ++a)
            for (int64_t i = 0; i < ph; ++i)
              for (int64_t j = 0; j < pw; ++j)
                for (int64_t ch = 0; ch < channels; ++ch)
                  yd[(((n * channels + ch) * tt + f * pt + a) * hh + gy * ph + i) * ww + gx * pw + j] = *src++;
        }
  return y;
}

}  // namespace ditgen::ops::cpu
