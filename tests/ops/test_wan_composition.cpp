// What Wan needs that existing ops already compute, checked against plain
// loops written from diffusers' WanTransformerBlock / WanResample code:
// - modulation: shift / scale / gate = scale_shift_table (6, D) + temb, per
//   sample (B, 6, D) or per token (Wan 2.2 TI2V: B, S, 6, D), through
//   add_broadcast_ + layer_norm_modulate + gated_residual_ (the per-token
//   form on x viewed as [B*S, 1, D]);
// - WanResample's time upsampling (a conv to 2C channels, then
//   reshape(b, 2, c, t, h, w) and stack on dim 3) and the frames <-> channels
//   swap around per-frame 2-D ops ([B, C, T, H, W] <-> [B*T, C, H, W]) as
//   copy_rows calls, one per (sample, half) or (sample, frame).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

// LayerNorm without affine of row r of x [rows, d], in double.
std::vector<double> ln_row(const Tensor& x, int64_t r, int64_t d, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < d; ++j) mean += x[r * d + j];
  mean /= d;
  for (int64_t j = 0; j < d; ++j) var += (x[r * d + j] - mean) * (x[r * d + j] - mean);
  var /= d;
  std::vector<double> out(d);
  for (int64_t j = 0; j < d; ++j) out[j] = (x[r * d + j] - mean) / std::sqrt(var + eps);
  return out;
}

}  // namespace

TEST_CASE("Wan modulation, per sample and per token: table + temb, LN * (1 + scale) + shift, x + gate * y") {
  const int64_t b = 2, s = 7, d = 45;
  const float eps = 1e-6f;
  const Tensor x = random_tensor({b, s, d}, 1, -3, 4), y = random_tensor({b, s, d}, 2);
  const Tensor table = random_tensor({6 * d}, 3);  // scale_shift_table (1, 6, D)
  for (bool per_token : {false, true}) {
    CAPTURE(per_token);
    const int64_t mod_rows = per_token ? b * s : b;  // temb (B, 6, D) or (B, S, 6, D)
    const Tensor temb = random_tensor({mod_rows, 6 * d}, 4);
    Tensor mod = temb.clone();
    ops::add_broadcast_(mod, table);
    // Per token, each token is its own "sample" of one row.
    const Tensor xv = per_token ? x.reshape({b * s, 1, d}) : x;
    Tensor normed = Tensor::empty(xv.shape()), ffn_in = Tensor::empty(xv.shape());
    ops::layer_norm_modulate(xv, mod, 0, d, eps, normed);          // shift_msa, scale_msa
    ops::layer_norm_modulate(xv, mod, 3 * d, 4 * d, eps, ffn_in);  // c_shift_msa, c_scale_msa
    Tensor res = xv.clone(), res2 = xv.clone();
    const Tensor yv = per_token ? y.reshape({b * s, 1, d}) : y;
    ops::gated_residual_(res, yv, mod, 2 * d);   // gate_msa
    ops::gated_residual_(res2, yv, mod, 5 * d);  // c_gate_msa
    std::vector<double> rn(x.numel()), rf(x.numel()), rr(x.numel()), rr2(x.numel());
    for (int64_t r = 0; r < b * s; ++r) {
      const int64_t m = per_token ? r : r / s;
      auto chunk = [&](int k, int64_t j) { return double(table[k * d + j]) + temb[m * 6 * d + k * d + j]; };
      const std::vector<double> ln = ln_row(x, r, d, eps);
      for (int64_t j = 0; j < d; ++j) {
        rn[r * d + j] = ln[j] * (1 + chunk(1, j)) + chunk(0, j);
        rf[r * d + j] = ln[j] * (1 + chunk(4, j)) + chunk(3, j);
        rr[r * d + j] = x[r * d + j] + double(y[r * d + j]) * chunk(2, j);
        rr2[r * d + j] = x[r * d + j] + double(y[r * d + j]) * chunk(5, j);
      }
    }
    CHECK(rel_l2(normed, rn) < 1e-6);
    CHECK(rel_l2(ffn_in, rf) < 1e-6);
    CHECK(rel_l2(res, rr) < 1e-6);
    CHECK(rel_l2(res2, rr2) < 1e-6);
  }
}

TEST_CASE("WanResample's time upsampling is two copy_rows per sample: out[:, c, 2t + j] = conv[:, j*C + c, t]") {
  const int64_t b = 2, c = 3, t = 4, hw = 5 * 6;
  const Tensor z = random_tensor({b, 2 * c, t, 5, 6}, 5);  // the time conv's output
  Tensor out = Tensor::empty({b, c, 2 * t, 5, 6});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t j = 0; j < 2; ++j)
      ops::copy_rows(z, (n * 2 * c + j * c) * t * hw, hw, out, n * c * 2 * t * hw + j * hw, 2 * hw, c * t, hw);
  // diffusers: x.reshape(b, 2, c, t, h, w); torch.stack((x[:, 0], x[:, 1]), 3).reshape(b, c, 2t, h, w).
  int64_t wrong = 0;
  for (int64_t n = 0; n < b; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t tt = 0; tt < t; ++tt)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t p = 0; p < hw; ++p)
            wrong += out[((n * c + ch) * 2 * t + 2 * tt + j) * hw + p] != z[(((n * 2 + j) * c + ch) * t + tt) * hw + p];
  CHECK(wrong == 0);
}

TEST_CASE("frames <-> channels around per-frame 2-D ops: [B, C, T, H, W] <-> [B*T, C, H, W] by copy_rows") {
  const int64_t b = 2, c = 5, t = 3, hw = 4 * 7;
  const Tensor v = random_tensor({b, c, t, 4, 7}, 6);
  Tensor frames = Tensor::empty({b * t, c, 4, 7});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t f = 0; f < t; ++f)  // one call per frame: c rows of hw
      ops::copy_rows(v, (n * c * t + f) * hw, t * hw, frames, (n * t + f) * c * hw, hw, c, hw);
  int64_t wrong = 0;
  for (int64_t n = 0; n < b; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t f = 0; f < t; ++f)
        for (int64_t p = 0; p < hw; ++p)
          wrong += frames[((n * t + f) * c + ch) * hw + p] != v[((n * c + ch) * t + f) * hw + p];
  CHECK(wrong == 0);
  Tensor back = Tensor::empty(v.shape());
  for (int64_t n = 0; n < b; ++n)
    for (int64_t f = 0; f < t; ++f)
      ops::copy_rows(frames, (n * t + f) * c * hw, hw, back, (n * c * t + f) * hw, t * hw, c, hw);
  CHECK(std::memcmp(back.raw(), v.raw(), v.nbytes()) == 0);
}

TEST_CASE("nearest-exact and nearest coincide for integer factors: upsample_nearest is WanUpsample's x2") {
  // nearest-exact: src = floor((dst + 0.5) / f); nearest: floor(dst / f).
  for (int64_t f = 1; f <= 4; ++f)
    for (int64_t dst = 0; dst < 64; ++dst)
      CHECK(static_cast<int64_t>(std::floor((dst + 0.5) / static_cast<double>(f))) == dst / f);
  const Tensor x = random_tensor({2, 3, 5, 7}, 7);
  const Tensor y = ops::upsample_nearest(x, 2);
  int64_t wrong = 0;
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t yy = 0; yy < 10; ++yy)
      for (int64_t xx = 0; xx < 14; ++xx)
        wrong += y[(i * 10 + yy) * 14 + xx] !=
                 x[(i * 5 + static_cast<int64_t>(std::floor((yy + 0.5) / 2))) * 7 +
                   static_cast<int64_t>(std::floor((xx + 0.5) / 2))];
  CHECK(wrong == 0);
}
