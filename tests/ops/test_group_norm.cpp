// ops::group_norm (with and without the fused SiLU) against a plain double
// reference of torch.nn.GroupNorm, on odd shapes, a 3-D input, features with
// a large mean (where a one-pass variance would lose precision) and values
// large enough to reach the saturated ends of SiLU's exp.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "ops/ops.h"
#include "test_helpers.h"

using ditgen::Tensor;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

Tensor gn_reference(const Tensor& x, int64_t G, const Tensor& w, const Tensor& b, double eps, bool silu) {
  const int64_t B = x.dim(0), C = x.dim(1), S = x.numel() / (B * C), cpg = C / G;
  Tensor out = Tensor::empty(x.shape());
  for (int64_t n = 0; n < B; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * C + g * cpg) * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cpg * S; ++i) mean += x[base + i];
      mean /= double(cpg * S);
      for (int64_t i = 0; i < cpg * S; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
      var /= double(cpg * S);
      for (int64_t c = 0; c < cpg; ++c)
        for (int64_t i = 0; i < S; ++i) {
          const int64_t ch = g * cpg + c, at = base + c * S + i;
          double y = (x[at] - mean) / std::sqrt(var + eps) * w[ch] + b[ch];
          if (silu) y = y / (1.0 + std::exp(-y));
          out[at] = static_cast<float>(y);
        }
    }
  return out;
}

void check_gn(ditgen::Shape shape, int64_t groups, float lo, float hi, float wscale, bool silu) {
  INFO("shape=", ditgen::shape_str(shape), " groups=", groups, " range=[", lo, ", ", hi, "] silu=", silu);
  const int64_t C = shape[1];
  Tensor x = random_tensor(shape, 11, lo, hi);
  Tensor w = random_tensor({C}, 12, -wscale, wscale);
  Tensor b = random_tensor({C}, 13, -wscale, wscale);
  Tensor got = ditgen::ops::group_norm(x, groups, w, b, 1e-6f, silu);
  Tensor ref = gn_reference(x, groups, w, b, 1e-6, silu);
  CHECK(rel_l2(got, ref) < 1e-5);
}

}  // namespace

TEST_CASE("group_norm matches torch.nn.GroupNorm semantics") {
  check_gn({2, 6, 7, 9}, 3, -1, 1, 1, false);
  check_gn({2, 6, 7, 9}, 6, -1, 1, 1, false);  // one channel per group
  check_gn({2, 6, 7, 9}, 1, -1, 1, 1, false);  // one group: layer norm over C,H,W
  check_gn({3, 10, 13}, 5, -2, 3, 1, false);   // [B, C, N]
}

TEST_CASE("group_norm with fused SiLU") {
  check_gn({2, 6, 7, 9}, 3, -1, 1, 1, true);
  check_gn({1, 8, 5, 3}, 4, -1, 1, 120, true);  // |y| up to ~200: exp saturates both ways
}

TEST_CASE("group_norm keeps precision with a large mean") {
  check_gn({2, 4, 11, 13}, 2, 1000.0f, 1000.5f, 1, false);
  check_gn({2, 4, 11, 13}, 2, 1000.0f, 1000.5f, 1, true);
}

TEST_CASE("group_norm rejects channels not divisible by groups") {
  Tensor x = Tensor::zeros({1, 6, 2, 2});
  Tensor w = Tensor::zeros({6});
  CHECK_THROWS_AS(ditgen::ops::group_norm(x, 4, w, w, 1e-6f, false), std::invalid_argument);
}
