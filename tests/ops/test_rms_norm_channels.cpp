// ops::rms_norm_channels (diffusers' WanRMS_norm: F.normalize over the
// channels times sqrt(C), times gamma, plus bias) against a plain loop in
// double, on 3-D, 4-D (the VAE attention's per-frame images) and 5-D (video)
// tensors with odd sizes, more positions than one CPU block, with and
// without bias, with the fused SiLU, and at an all-zero position (F.normalize
// clamps the norm at 1e-12, so the output is bias, not NaN).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

std::vector<double> reference(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool silu) {
  const int64_t B = x.dim(0), C = x.dim(1), S = x.numel() / (B * C);
  std::vector<double> out(x.numel());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      double sq = 0;
      for (int64_t c = 0; c < C; ++c) sq += double(x[(b * C + c) * S + s]) * x[(b * C + c) * S + s];
      const double norm = std::max(std::sqrt(sq), 1e-12);
      for (int64_t c = 0; c < C; ++c) {
        double v = x[(b * C + c) * S + s] / norm * std::sqrt(double(C)) * gamma[c] + (bias ? (*bias)[c] : 0.0);
        if (silu) v = v / (1 + std::exp(-v));
        out[(b * C + c) * S + s] = v;
      }
    }
  return out;
}

}  // namespace

TEST_CASE("rms_norm_channels matches F.normalize(x, dim=1) * sqrt(C) * gamma + bias, then SiLU when fused") {
  for (const Shape& shape : {Shape{2, 12, 3, 5, 7}, Shape{3, 9, 5, 7}, Shape{2, 5, 301}, Shape{1, 1, 17},
                             Shape{1, 96, 2, 17, 19}, Shape{4, 3, 1, 1, 1}})
    for (bool with_bias : {false, true})
      for (bool silu : {false, true}) {
        CAPTURE(shape_str(shape));
        CAPTURE(with_bias);
        CAPTURE(silu);
        const Tensor x = random_tensor(shape, 1, -3.0f, 5.0f);
        const Tensor gamma = random_tensor({shape[1]}, 2, 0.5f, 1.5f), bias = random_tensor({shape[1]}, 3);
        const Tensor* bp = with_bias ? &bias : nullptr;
        const Tensor y = ops::rms_norm_channels(x, gamma, bp, silu);
        CHECK(y.shape() == x.shape());
        const double err = rel_l2(y, reference(x, gamma, bp, silu));
        CAPTURE(err);
        CHECK(err < 1e-6);
      }
}

TEST_CASE("rms_norm_channels takes gamma / bias in any shape of C values and clamps a zero norm") {
  Tensor x = random_tensor({1, 4, 2, 3}, 4);
  for (int64_t c = 0; c < 4; ++c) x[c * 6 + 5] = 0.0f;  // position 5 all zero
  const Tensor gamma = random_tensor({4, 1, 1}, 5), bias = random_tensor({4, 1, 1}, 6);
  const Tensor y = ops::rms_norm_channels(x, gamma, &bias, false);
  CHECK(rel_l2(y, reference(x, gamma, &bias, false)) < 1e-6);
  for (int64_t c = 0; c < 4; ++c) CHECK(y[c * 6 + 5] == bias[c]);
}

TEST_CASE("rms_norm_channels checks its operands") {
  const Tensor x = Tensor::zeros({2, 4, 3});
  CHECK_THROWS_AS(ops::rms_norm_channels(x, Tensor::zeros({3}), nullptr, false), std::invalid_argument);
  const Tensor b5 = Tensor::zeros({5});
  CHECK_THROWS_AS(ops::rms_norm_channels(x, Tensor::zeros({4}), &b5, false), std::invalid_argument);
  CHECK_THROWS_AS(ops::rms_norm_channels(Tensor::zeros({4}), Tensor::zeros({4}), nullptr, false),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::rms_norm_channels(x.to(DType::kBF16), Tensor::zeros({4}).to(DType::kBF16), nullptr, false),
                  std::invalid_argument);  // CPU: float32
}
