// LoRA's arithmetic (ops/lora_delta.h) against plain double loops, on odd
// shapes: the merged weight, the run-time output (whose sum with x · W^T is
// x · the merged weight^T), the full delta, a tp rank's columns, and the
// shape checks.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "ops/lora_delta.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

// W + f · B · A, element by element.
std::vector<double> merged(const Tensor& w, const Tensor& a, const Tensor& b, double f) {
  const int64_t out = b.dim(0), r = a.dim(0), in = a.dim(1);
  std::vector<double> m(static_cast<size_t>(out * in));
  for (int64_t i = 0; i < out; ++i)
    for (int64_t j = 0; j < in; ++j) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k) s += double(b[i * r + k]) * a[k * in + j];
      m[i * in + j] = w[i * in + j] + f * s;
    }
  return m;
}

}  // namespace

TEST_CASE("lora delta: merged weight, run-time output and full delta against plain loops") {
  const int64_t out = 13, in = 7, r = 3, rows = 5;
  const Tensor a = random_tensor({r, in}, 1), b = random_tensor({out, r}, 2), w0 = random_tensor({out, in}, 3);
  const float f = 0.7f * 1.5f;

  Tensor w = w0.clone();
  ops::lora_merge_(w, a, b, f);
  const std::vector<double> want = merged(w0, a, b, f);
  CHECK(rel_l2(w, want) < 1e-6);

  // y = x W0^T, then += f (x A^T) B^T: x times the merged weight
  const Tensor x = random_tensor({1, rows, in}, 4);
  Tensor y = Tensor::zeros({1, rows, out});
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t i = 0; i < out; ++i) {
      double s = 0;
      for (int64_t j = 0; j < in; ++j) s += double(x[n * in + j]) * w0[i * in + j];
      y[n * out + i] = static_cast<float>(s);
    }
  ops::lora_apply_(x, a, b, f, y);
  std::vector<double> y_want(static_cast<size_t>(rows * out));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t i = 0; i < out; ++i) {
      double s = 0;
      for (int64_t j = 0; j < in; ++j) s += double(x[n * in + j]) * want[i * in + j];
      y_want[n * out + i] = s;
    }
  CHECK(rel_l2(y, y_want) < 1e-6);

  Tensor t = random_tensor({1, 6, 5}, 5);
  const Tensor t0 = t.clone(), d = random_tensor({1, 6, 5}, 6);
  ops::lora_add_delta_(t, d, -0.25f);
  std::vector<double> t_want;
  for (int64_t i = 0; i < t.numel(); ++i) t_want.push_back(t0[i] - 0.25 * d[i]);
  CHECK(rel_l2(t, t_want) < 1e-7);
}

TEST_CASE("lora delta: shapes that do not fit are refused") {
  Tensor w = Tensor::zeros({4, 3}), y = Tensor::zeros({2, 4}), t = Tensor::zeros({4});
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 2});
  CHECK_THROWS_AS(ops::lora_merge_(w, a, Tensor::zeros({4, 3}), 1), std::invalid_argument);
  CHECK_THROWS_AS(ops::lora_merge_(w, Tensor::zeros({2, 5}), b, 1), std::invalid_argument);
  CHECK_THROWS_AS(ops::lora_apply_(Tensor::zeros({2, 5}), a, b, 1, y), std::invalid_argument);
  CHECK_THROWS_AS(ops::lora_apply_(Tensor::zeros({3, 3}), a, b, 1, y), std::invalid_argument);
  CHECK_THROWS_AS(ops::lora_add_delta_(t, Tensor::zeros({1, 4}), 1), std::invalid_argument);
}

TEST_CASE("lora delta: lora_columns copies a tp rank's columns, all of them without a copy") {
  const Tensor a = random_tensor({3, 7}, 7);
  const Tensor mid = ops::lora_columns(a, 2, 4);
  REQUIRE(mid.shape() == Shape{3, 4});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) CHECK(mid.data()[r * 4 + c] == a.data()[r * 7 + 2 + c]);
  CHECK(ops::lora_columns(a, 0, 7).raw() == a.raw());
  CHECK_THROWS_AS(ops::lora_columns(a, 5, 3), std::out_of_range);
  CHECK_THROWS_AS(ops::lora_columns(a, -1, 2), std::out_of_range);
  CHECK_THROWS_AS(ops::lora_columns(Tensor::zeros({7}), 0, 2), std::invalid_argument);
}
