// The op front end (ops.cpp) on the CPU: the tensor-level forms of GEMM,
// linear_into, the modulation ops and the data movement ops against plain
// loops, and the argument checks every device shares (mismatched devices or
// dtypes, columns outside a modulation, rows outside a tensor).
#include <doctest/doctest.h>

#include <stdexcept>

#include "ops/backend.h"
#include "ops/ops.h"
#include "test_helpers.h"
#include "util/error.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

TEST_CASE("gemm on tensors: every transpose combination against a plain loop") {
  const int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor c = random_tensor({m, n}, 3);
      std::vector<double> ref(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          ref[i * n + j] = 0.5 * acc + 2.0 * c[i * n + j];
        }
      ops::gemm(ta, tb, 0.5f, a, b, 2.0f, c);
      CAPTURE(ta);
      CAPTURE(tb);
      CHECK(rel_l2(c, ref) < 1e-6);
    }
  Tensor c = Tensor::empty({m, n});
  CHECK_THROWS_AS(ops::gemm(false, false, 1.0f, random_tensor({m, k}, 4), random_tensor({k + 1, n}, 5), 0.0f, c),
                  std::invalid_argument);
}

TEST_CASE("linear_into writes its columns of a wider buffer and nothing else") {
  const Tensor x = random_tensor({2, 3, 6}, 6), w = random_tensor({4, 6}, 7), bias = random_tensor({4}, 8);
  Tensor y = Tensor::full({2, 3, 11}, 42.0f);
  ops::linear_into(x, w, &bias, y, 5);
  const Tensor want = ops::linear(x, w, &bias);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 11; ++j) {
      const bool mine = j >= 5 && j < 9;
      // oneDNN may pick another kernel for a strided output: equal to rounding.
      if (mine) CHECK(y[r * 11 + j] == doctest::Approx(want[r * 4 + j - 5]).epsilon(1e-6));
      else CHECK(y[r * 11 + j] == 42.0f);
    }
  CHECK_THROWS_AS(ops::linear_into(x, w, &bias, y, 8), std::invalid_argument);  // columns 8..11 of 11
}

TEST_CASE("layer_norm_modulate and gated_residual_ read their modulation columns") {
  const int64_t b = 2, n = 3, c = 4, m = 6 * c;
  const Tensor x = random_tensor({b, n, c}, 9), mod = random_tensor({b, m}, 10), y = random_tensor({b, n, c}, 11);
  Tensor out = Tensor::empty({b, n, c});
  ops::layer_norm_modulate(x, mod, 3 * c, 4 * c, 1e-6f, out);
  const Tensor normed = ops::layer_norm(x, nullptr, nullptr, 1e-6f);
  for (int64_t i = 0; i < b * n * c; ++i) {
    const int64_t bi = i / (n * c), j = i % c;
    CHECK(out[i] == doctest::Approx(normed[i] * (1 + mod[bi * m + 4 * c + j]) + mod[bi * m + 3 * c + j]));
  }
  Tensor acc = x.clone();
  ops::gated_residual_(acc, y, mod, 5 * c);
  for (int64_t i = 0; i < b * n * c; ++i)
    CHECK(acc[i] == doctest::Approx(x[i] + mod[(i / (n * c)) * m + 5 * c + i % c] * y[i]));
  CHECK_THROWS_AS(ops::layer_norm_modulate(x, mod, 3 * c, m - c + 1, 1e-6f, out), std::invalid_argument);
  CHECK_THROWS_AS(ops::gated_residual_(acc, y, random_tensor({b + 1, m}, 12), 0), std::invalid_argument);
}

TEST_CASE("add_broadcast_ repeats its operand over the rows") {
  Tensor x = random_tensor({3, 2, 5}, 13);
  const Tensor x0 = x.clone(), y = random_tensor({2, 5}, 14);
  ops::add_broadcast_(x, y);
  for (int64_t i = 0; i < 30; ++i) CHECK(x[i] == x0[i] + y[i % 10]);
  CHECK_THROWS_AS(ops::add_broadcast_(x, random_tensor({7}, 15)), std::invalid_argument);
}

TEST_CASE("copy_rows and gather_rows move exactly the rows asked for, inside the tensors") {
  const Tensor src = random_tensor({6, 7}, 16);
  Tensor dst = Tensor::zeros({4, 9});
  ops::copy_rows(src, 2, 7, dst, 1, 9, 4, 3);  // src rows 0..3, columns 2..4 -> dst rows 0..3, columns 1..3
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 9; ++j) {
      const bool written = j >= 1 && j < 4;
      CHECK(dst[r * 9 + j] == (written ? src[r * 7 + 2 + j - 1] : 0.0f));
    }
  CHECK_THROWS_AS(ops::copy_rows(src, 2, 7, dst, 1, 9, 5, 3), std::invalid_argument);  // past dst's end
  CHECK_THROWS_AS(ops::copy_rows(src, 0, 2, dst, 0, 9, 2, 3), std::invalid_argument);   // stride < row length

  const Tensor g = ops::gather_rows(src, {5, 0, 5});
  REQUIRE(g.shape() == Shape{3, 7});
  for (int64_t j = 0; j < 7; ++j) {
    CHECK(g[j] == src[5 * 7 + j]);
    CHECK(g[7 + j] == src[j]);
    CHECK(g[14 + j] == src[5 * 7 + j]);
  }
  CHECK_THROWS_AS(ops::gather_rows(src, {6}), std::invalid_argument);
}

TEST_CASE("copy_rows converts between float32 and bfloat16 on the CPU, rounding to nearest even") {
  const Tensor src = random_tensor({6, 7}, 17);
  Tensor half = Tensor::zeros({4, 9}, Device::kCPU, DType::kBF16);
  ops::copy_rows(src, 2, 7, half, 1, 9, 4, 3);  // float32 -> bfloat16
  Tensor back = Tensor::zeros({4, 9});
  ops::copy_rows(half, 0, 9, back, 0, 9, 4, 9);  // bfloat16 -> float32, the unwritten zeros too
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 9; ++j) {
      const bool written = j >= 1 && j < 4;
      // Tensor::to is the reference rounding (tensor/half.h)
      const float want = written ? Tensor::full({1}, src[r * 7 + 2 + j - 1]).to(DType::kBF16).to(DType::kF32)[0] : 0.0f;
      CHECK(back[r * 9 + j] == want);
    }
  CHECK_THROWS_AS(ops::copy_rows(src, 0, 7, half, 0, 9, 5, 3), std::invalid_argument);  // past half's end
  Tensor f16 = Tensor::zeros({4, 9}, Device::kCPU, DType::kF16);
  CHECK_THROWS_AS(ops::copy_rows(src, 0, 7, f16, 0, 9, 4, 3), std::invalid_argument);  // only float32 <-> bfloat16
}

TEST_CASE("attention_merge_ checks the shapes of its tensors") {
  Tensor out = Tensor::zeros({1, 4, 6}), lse = Tensor::zeros({1, 2, 4});
  CHECK_THROWS_AS(ops::attention_merge_(out, lse, Tensor::zeros({1, 4, 6}), Tensor::zeros({1, 3, 4}), 2),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::attention_merge_(out, lse, Tensor::zeros({1, 4, 6}), Tensor::zeros({1, 2, 4}), 4),
                  std::invalid_argument);  // 6 channels are not 4 heads
}

TEST_CASE("CPU ops compute in float32, CUDA tensors need a build with CUDA and a device") {
  // A 16-bit CPU tensor exists (a weight as stored), but only a GEMM takes
  // one, as its weight: any other op names itself and the dtype.
  Tensor h = Tensor::zeros({2, 4}, Device::kCPU, DType::kBF16);
  const std::string msg = [&] {
    try {
      ops::silu_(h);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  }();
  CHECK(msg.find("silu_") != std::string::npos);
  CHECK(msg.find("bfloat16") != std::string::npos);
  const Tensor x = Tensor::zeros({3, 4}), i32 = Tensor::zeros({4, 4}, Device::kCPU, DType::kI32);
  CHECK_THROWS_AS(ops::layer_norm(h, nullptr, nullptr, 1e-5f), std::invalid_argument);
  CHECK_THROWS_AS(ops::add_(h, h), std::invalid_argument);
  CHECK_THROWS_AS(ops::patchify(Tensor::zeros({1, 1, 2, 2}, Device::kCPU, DType::kF16), 2), std::invalid_argument);
  CHECK_THROWS_AS(ops::gather_rows(h, {0}), std::invalid_argument);
  CHECK_THROWS_AS(ops::linear(h, Tensor::zeros({4, 4}), nullptr), std::invalid_argument);  // activations float32
  CHECK_THROWS_AS(ops::linear(x, i32, nullptr), std::invalid_argument);                    // weights floating
  const Tensor hb = Tensor::zeros({4}, Device::kCPU, DType::kBF16);
  CHECK_THROWS_AS(ops::linear(x, Tensor::zeros({4, 4}), &hb), std::invalid_argument);  // bias float32
  CHECK(ops::linear(x, h.reshape({2, 4}), nullptr).dtype() == DType::kF32);
  CHECK(ops::convert(h, DType::kF32).dtype() == DType::kF32);
  CHECK(ops::convert(x, DType::kF32).raw() == x.raw());

  const Tensor t = Tensor::full({2, 3}, 1.5f);
  CHECK(t.device() == Device::kCPU);
  CHECK(t.dtype() == DType::kF32);
  CHECK(t.nbytes() == 24);
  CHECK(t.to(Device::kCPU, DType::kF32).raw() == t.raw());  // already there: shared, not copied
  CHECK(t.raw_at(6) == static_cast<const char*>(t.raw()) + 24);
  CHECK_THROWS_AS(t.raw_at(7), std::out_of_range);
  if (ops::cuda_device_count() == 0) {
    // No device: asking for CUDA memory is a runtime error naming the reason,
    // never a crash (CPU-only build: "built without the CUDA backend").
    CHECK_THROWS_AS(Tensor::empty({2}, Device::kCUDA, DType::kBF16), RuntimeFailure);
    CHECK_THROWS_AS(t.to(Device::kCUDA, DType::kF32), RuntimeFailure);
  }
}

TEST_CASE("attention modes by name, as --attention spells them") {
  CHECK(ops::attention_mode_from_name("auto") == AttentionMode::kAuto);
  CHECK(ops::attention_mode_from_name("flash") == AttentionMode::kFlash);
  CHECK(ops::attention_mode_from_name("math") == AttentionMode::kMath);
  CHECK_THROWS_AS(ops::attention_mode_from_name("fast"), std::invalid_argument);
}
