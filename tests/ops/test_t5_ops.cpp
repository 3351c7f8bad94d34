// The T5 encoder's elementwise and normalisation ops (rms_norm, relu_, mul_)
// against plain double-precision loops on odd shapes, and their argument
// checks.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "ops/ops.h"
#include "ops/test_helpers.h"

using namespace ditgen;
using testing::random_tensor;
using testing::rel_l2;

namespace {

// T5LayerNorm in double: weight * x / sqrt(mean(x^2) + eps) per row of C.
std::vector<double> rms_norm_reference(const Tensor& x, const Tensor& w, double eps) {
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  std::vector<double> y(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t j = 0; j < c; ++j) sq += double(x[r * c + j]) * x[r * c + j];
    const double rstd = 1.0 / std::sqrt(sq / c + eps);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = w[j] * (x[r * c + j] * rstd);
  }
  return y;
}

// max |got - ref| / max |ref| (docs/design.md §7's second measure).
double max_rel(const Tensor& got, const std::vector<double>& ref) {
  double md = 0, mr = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    md = std::max(md, std::fabs(got[i] - ref[i]));
    mr = std::max(mr, std::fabs(ref[i]));
  }
  return md / (mr > 0 ? mr : 1);
}

}  // namespace

TEST_CASE("rms_norm matches T5LayerNorm in double: odd widths, small and large magnitudes") {
  struct Case {
    Shape shape;
    float lo, hi;
  };
  // Odd C (40, 37: no whole vector), a row past the blocked sum's block
  // (300), a 4096-wide row (T5-XXL), values of magnitude 1e-3 to 3e4.
  for (const Case& c : {Case{{2, 7, 40}, -1, 1}, Case{{5, 37}, -3e4f, 3e4f}, Case{{3, 11, 37}, 1e3f, 2e3f},
                        Case{{4, 300}, -1e-3f, 1e-3f}, Case{{2, 4096}, -50, 80}, Case{{37}, -2, 5}}) {
    CAPTURE(shape_str(c.shape));
    CAPTURE(c.hi);
    const int64_t ch = c.shape.back();
    const Tensor x = random_tensor(c.shape, 1, c.lo, c.hi), w = random_tensor({ch}, 2, 0.5f, 2.0f);
    for (float eps : {1e-6f, 1e-2f}) {
      CAPTURE(eps);
      const Tensor y = ops::rms_norm(x, w, eps);
      CHECK(y.shape() == x.shape());
      const std::vector<double> ref = rms_norm_reference(x, w, eps);
      CHECK(rel_l2(y, ref) < 1e-6);
      CHECK(max_rel(y, ref) < 2e-6);
    }
  }
  // eps dominates tiny rows: x * rsqrt(eps), not x / |x|.
  const Tensor tiny = Tensor::full({1, 37}, 1e-5f), ones = Tensor::full({37}, 1.0f);
  const Tensor y = ops::rms_norm(tiny, ones, 1e-6f);
  CHECK(y[0] == doctest::Approx(1e-5 / std::sqrt(1e-10 + 1e-6)).epsilon(1e-6));
  // No mean subtraction: a constant row normalises to the weight, not to 0.
  const Tensor w = random_tensor({37}, 3);
  const Tensor z = ops::rms_norm(Tensor::full({2, 37}, 1000.0f), w, 1e-6f);
  CHECK(rel_l2(z, rms_norm_reference(Tensor::full({2, 37}, 1000.0f), w, 1e-6)) < 1e-6);
}

TEST_CASE("rms_norm checks its weight") {
  const Tensor x = random_tensor({3, 40}, 4);
  CHECK_THROWS_AS(ops::rms_norm(x, random_tensor({39}, 5), 1e-6f), std::invalid_argument);
  CHECK_THROWS_AS(ops::rms_norm(x, Tensor::zeros({40}, Device::kCPU, DType::kBF16), 1e-6f), std::invalid_argument);
  CHECK_THROWS_AS(ops::rms_norm(Tensor::zeros({3, 40}, Device::kCPU, DType::kF16), Tensor::zeros({40}), 1e-6f),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::rms_norm(x, Tensor(), 1e-6f), std::invalid_argument);
}

TEST_CASE("relu_ zeroes the negatives and keeps the rest, NaN included") {
  Tensor x = random_tensor({3, 1001}, 6, -5, 5);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = -std::numeric_limits<float>::infinity();
  x[9] = std::numeric_limits<float>::infinity();
  x[10] = 0.0f;
  Tensor y = x.clone();
  ops::relu_(y);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (i == 7) continue;
    CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f));
  }
  CHECK(std::isnan(y[7]));
  CHECK(y[8] == 0.0f);
  CHECK(y[9] == std::numeric_limits<float>::infinity());
  // A large tensor takes the parallel branch.
  Tensor big = random_tensor({5, 7001}, 7, -1, 1), ref = big.clone();
  ops::relu_(big);
  int64_t wrong = 0;
  for (int64_t i = 0; i < big.numel(); ++i) wrong += big[i] != std::max(ref[i], 0.0f);
  CHECK(wrong == 0);
}

TEST_CASE("mul_ multiplies element by element, and checks shapes") {
  for (Shape s : {Shape{3, 37}, Shape{2, 9, 1001}}) {
    CAPTURE(shape_str(s));
    Tensor x = random_tensor(s, 8, -3, 3);
    const Tensor y = random_tensor(s, 9, -3, 3), x0 = x.clone();
    ops::mul_(x, y);
    int64_t wrong = 0;
    for (int64_t i = 0; i < x.numel(); ++i) wrong += x[i] != x0[i] * y[i];  // one float product: exact match
    CHECK(wrong == 0);
  }
  // T5 v1.1's gated feed-forward: gelu(wi_0 x) * (wi_1 x).
  Tensor a = random_tensor({4, 45}, 10), b = random_tensor({4, 45}, 11);
  const Tensor a0 = a.clone();
  ops::gelu_tanh_(a);
  ops::mul_(a, b);
  std::vector<double> ref(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double v = a0[i];
    ref[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))) * b[i];
  }
  CHECK(rel_l2(a, ref) < 1e-6);

  Tensor x = random_tensor({3, 37}, 12);
  CHECK_THROWS_AS(ops::mul_(x, random_tensor({37, 3}, 13)), std::invalid_argument);
  CHECK_THROWS_AS(ops::mul_(x, random_tensor({3, 36}, 13)), std::invalid_argument);
  CHECK_THROWS_AS(ops::mul_(x, random_tensor({111}, 13)), std::invalid_argument);  // same numel, other shape
  CHECK_THROWS_AS(ops::mul_(x, Tensor::zeros({3, 37}, Device::kCPU, DType::kBF16)), std::invalid_argument);
}
