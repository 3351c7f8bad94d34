// GEMMs with 16-bit weights on the CPU, where the weight's dtype is the
// arithmetic (ops/cpu/gemm.cpp):
// - float16: widened exactly to float32, float32 arithmetic, so equal to the
//   float32 op on the weight widened beforehand by Tensor::to (bit for bit
//   when the weight fits one block of the scratch: the same float32 matmul
//   call; within 1e-6 relative L2 over several blocks, whose split may sum
//   in another order);
// - bfloat16: a bfloat16 GEMM, the input rounded to bfloat16 (nearest
//   even), products exact, float32 sums: checked against a double-precision
//   loop over the rounded input, on oneDNN's bf16 kernel and on the emulated
//   path (both forced here), and shown to differ from the unrounded product,
//   so a GEMM that silently stayed float32 fails.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

// op(a)[m, k] · op(b)[k, n] in double, with a's elements rounded to
// bfloat16 when asked; b as stored (its float32 values).
std::vector<double> product(const Tensor& a, bool ta, const Tensor& b, bool tb, bool round_a) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  const std::vector<float> bf = b.to_vector();
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        float x = ta ? a[p * m + i] : a[i * k + p];
        if (round_a) x = round_bf16(x);
        acc += static_cast<double>(x) * bf[tb ? j * k + p : p * n + j];
      }
      out[i * n + j] = acc;
    }
  return out;
}

// Runs f once on oneDNN's bfloat16 kernel (where this CPU has one) and once
// on the emulated path, in blocks of `block_elements` input elements.
template <class F>
void on_both_bf16_paths(int64_t block_elements, F f) {
  for (bool emulate : {false, true}) {
    CAPTURE(emulate);
    ops::cpu::set_bf16_hooks({emulate, block_elements});
    f();
  }
  ops::cpu::set_bf16_hooks({});
}

}  // namespace

TEST_CASE("linear with a float16 weight equals float32 linear on the widened weight") {
  struct Case {
    Shape x;
    int64_t n;
  };
  // Odd shapes; one row (the GEMV path); more weight rows than one scratch block.
  const Case cases[] = {{{3, 7}, 5}, {{1, 33}, 17}, {{2, 5, 64}, 130}, {{1, 1000}, 2500}, {{9, 1000}, 2200}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.n);
    const int64_t k = c.x.back();
    const Tensor x = random_tensor(c.x, ++seed);
    const Tensor w16 = random_tensor({c.n, k}, ++seed).to(DType::kF16);
    const Tensor w32 = w16.to(DType::kF32);
    const Tensor bias = random_tensor({c.n}, ++seed);
    const bool one_block = c.n * k <= (1 << 20);
    auto same = [&](const Tensor& a, const Tensor& b) { return one_block ? same_bits(a, b) : rel_l2(a, b) < 1e-6; };
    CHECK(same(ops::linear(x, w16, &bias), ops::linear(x, w32, &bias)));
    CHECK(same(ops::linear(x, w16, nullptr), ops::linear(x, w32, nullptr)));

    // linear_into: its columns of a wider buffer, the rest untouched.
    const int64_t rows = x.numel() / k, width = c.n + 3;
    Tensor y16 = Tensor::full({rows, width}, 7.0f), y32 = Tensor::full({rows, width}, 7.0f);
    ops::linear_into(x, w16, &bias, y16, 2);
    ops::linear_into(x, w32, &bias, y32, 2);
    CHECK(same(y16, y32));
    CHECK(y16[0] == 7.0f);
    CHECK(y16[width - 1] == 7.0f);
  }
}

TEST_CASE("linear with a bfloat16 weight rounds its input to bfloat16 and sums in float32") {
  struct Case {
    Shape x;
    int64_t n;
    int64_t block;  // input elements per rounded block (0: the default)
  };
  // Odd shapes; one row; up to 8 rows (the few-rows kernel: n not a
  // multiple of its row blocks, k not of its 32-element steps) and more (the
  // matmul); a weight larger than a widening block; inputs rounded in
  // several blocks of rows.
  const Case cases[] = {{{3, 7}, 5, 0},       {{1, 33}, 17, 0},        {{2, 1152}, 70, 0}, {{8, 40}, 9, 0},
                        {{2, 5, 64}, 130, 0}, {{9, 1000}, 2200, 0},    {{37, 96}, 50, 96 * 8},
                        {{5, 301}, 12, 1}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.n);
    CAPTURE(c.block);
    const int64_t k = c.x.back(), rows = shape_numel(c.x) / k;
    const Tensor x = random_tensor(c.x, ++seed), w = random_tensor({c.n, k}, ++seed).to(DType::kBF16);
    const Tensor bias = random_tensor({c.n}, ++seed);
    const Tensor x2 = x.reshape({rows, k});
    std::vector<double> want = product(x2, false, w, true, true), unrounded = product(x2, false, w, true, false);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        want[i * c.n + j] += bias[j];
        unrounded[i * c.n + j] += bias[j];
      }
    on_both_bf16_paths(c.block, [&] {
      const Tensor y = ops::linear(x, w, &bias);
      CHECK(rel_l2(y, want) < 1e-6);
      CHECK(rel_l2(y, unrounded) > 1e-4);  // the input really was rounded
      const int64_t width = c.n + 3;
      Tensor into = Tensor::full({rows, width}, 7.0f);
      ops::linear_into(x, w, &bias, into, 1);
      for (int64_t i = 0; i < rows; ++i) {
        CHECK(into[i * width] == 7.0f);
        CHECK(into[i * width + width - 1] == 7.0f);
        for (int64_t j = 0; j < c.n; ++j)
          CHECK(into[i * width + 1 + j] == doctest::Approx(want[i * c.n + j]).epsilon(1e-5).scale(1.0));
      }
    });
  }
}

TEST_CASE("linear's fused GELU equals the GEMM followed by gelu_tanh_") {
  const Tensor x = random_tensor({6, 40}, 70, -2.0f, 2.0f), bias = random_tensor({23}, 71);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(t));
    const Tensor w = random_tensor({23, 40}, 72).to(t);
    auto check = [&] {
      Tensor want = ops::linear(x, w, &bias);
      ops::gelu_tanh_(want);
      const Tensor got = ops::linear(x, w, &bias, ops::Activation::kGeluTanh);
      CHECK(testing::max_rel(got, want) < 1e-6);
      const Tensor one = ops::linear(x.slice0(2, 3), w, &bias, ops::Activation::kGeluTanh);  // one row
      CHECK(testing::max_rel(one, want.slice0(2, 3).clone()) < 1e-6);
    };
    if (t == DType::kBF16) on_both_bf16_paths(0, check);
    else check();
  }
}

TEST_CASE("gemm with a 16-bit b: float16 as the widened float32 gemm, bfloat16 on the rounded a") {
  const int64_t m = 6, n = 700, k = 1600;  // two widening blocks either way (1.12M elements)
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 4);
      const Tensor c0 = random_tensor({m, n}, 6);
      {
        const Tensor b16 = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 5).to(DType::kF16);
        Tensor c16 = c0.clone(), c32 = c0.clone();
        ops::gemm(ta, tb, 0.5f, a, b16, 2.0f, c16);
        ops::gemm(ta, tb, 0.5f, a, b16.to(DType::kF32), 2.0f, c32);
        CHECK(rel_l2(c16, c32) < 1e-6);
        Tensor d16 = random_tensor({m, 30}, 7), d32 = d16.clone();  // one block: the same float32 call
        const Tensor small = random_tensor(tb ? Shape{30, k} : Shape{k, 30}, 8).to(DType::kF16);
        ops::gemm(ta, tb, 0.5f, a, small, 2.0f, d16);
        ops::gemm(ta, tb, 0.5f, a, small.to(DType::kF32), 2.0f, d32);
        CHECK(same_bits(d16, d32));
      }
      const Tensor bb = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 9).to(DType::kBF16);
      std::vector<double> want = product(a, ta, bb, tb, true);
      for (int64_t i = 0; i < m * n; ++i) want[i] = 0.5 * want[i] + 2.0 * c0[i];
      on_both_bf16_paths(2 * k, [&] {  // a rounded two rows at a time
        Tensor c = c0.clone();
        ops::gemm(ta, tb, 0.5f, a, bb, 2.0f, c);
        CHECK(rel_l2(c, want) < 1e-6);
      });
    }
  // a and c stay float32.
  Tensor c = Tensor::zeros({2, 2});
  CHECK_THROWS_AS(ops::gemm(false, false, 1.0f, Tensor::zeros({2, 2}, Device::kCPU, DType::kBF16),
                            Tensor::zeros({2, 2}), 0.0f, c),
                  std::invalid_argument);
}

TEST_CASE("a packed bfloat16 weight gives the plain weight's products (linear, linear_into, gemm's b)") {
  const int64_t n = 128, k = 96;  // a shape oneDNN packs into exactly its own bytes
  const Tensor w = random_tensor({n, k}, 80).to(DType::kBF16);
  const Tensor packed = ops::pack_gemm_weight(w);
  if (!ops::cpu::onednn_packs_weight(n, k)) {
    MESSAGE("no native bfloat16 matmul here: weights stay row-major");
    CHECK(packed.layout() == Layout::kRowMajor);
    return;
  }
  REQUIRE(packed.layout() == Layout::kGemmPacked);
  CHECK(packed.shape() == w.shape());
  CHECK(packed.dtype() == DType::kBF16);
  CHECK(std::memcmp(packed.raw(), w.raw(), w.nbytes()) != 0);  // really another layout
  const Tensor bias = random_tensor({n}, 81);
  // One row, the few-rows sizes (a packed weight never takes the few-rows
  // kernel), and a matmul's worth; against the double loop on rounded inputs.
  for (int64_t rows : {1, 3, 8, 9, 130}) {
    CAPTURE(rows);
    const Tensor x = random_tensor({rows, k}, 82 + static_cast<uint32_t>(rows), -2.0f, 2.0f);
    std::vector<double> want = product(x, false, w, true, true);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += bias[j];
    CHECK(rel_l2(ops::linear(x, packed, &bias), want) < 1e-6);
    Tensor gelu_want = ops::linear(x, w, &bias);
    ops::gelu_tanh_(gelu_want);
    CHECK(testing::max_rel(ops::linear(x, packed, &bias, ops::Activation::kGeluTanh), gelu_want) < 1e-5);
    Tensor into = Tensor::full({rows, n + 2}, 7.0f);
    ops::linear_into(x, packed, &bias, into, 2);
    for (int64_t i = 0; i < rows; ++i) {
      CHECK(into[i * (n + 2)] == 7.0f);
      CHECK(into[i * (n + 2) + 2] == doctest::Approx(want[i * n]).epsilon(1e-5).scale(1.0));
    }
    // gemm's b under trans_b, a transposed too (the VAE attention's call).
    const Tensor xt = random_tensor({k, rows}, 90);
    Tensor c = Tensor::zeros({rows, n}), c_plain = Tensor::zeros({rows, n});
    ops::gemm(true, true, 0.5f, xt, packed, 0.0f, c);
    ops::gemm(true, true, 0.5f, xt, w, 0.0f, c_plain);
    CHECK(rel_l2(c, c_plain) < 1e-6);
  }
  // Only the GEMM reads it: views, element access and conversions refuse it.
  CHECK_THROWS_AS(packed.reshape({k, n}), std::logic_error);
  CHECK_THROWS_AS(packed.slice0(0, 1), std::logic_error);
  CHECK_THROWS_AS(packed.data_as<BFloat16>(), std::logic_error);
  CHECK_THROWS_AS(packed.to(DType::kF32), std::logic_error);
  CHECK_THROWS_AS(packed.to_vector(), std::logic_error);
  Tensor c = Tensor::zeros({2, n});
  CHECK_THROWS_AS(ops::gemm(false, false, 1.0f, random_tensor({2, n}, 91), packed, 0.0f, c), std::invalid_argument);
  // What does not pack stays itself: float32, a shape that would need padding,
  // and under the emulation hook.
  const Tensor f32 = random_tensor({n, k}, 92);
  CHECK(ops::pack_gemm_weight(f32).raw() == f32.raw());
  const Tensor odd = random_tensor({24, 40}, 93).to(DType::kBF16);
  CHECK(ops::pack_gemm_weight(odd).layout() == Layout::kRowMajor);
  ops::cpu::set_bf16_hooks({true, 0});
  CHECK(ops::pack_gemm_weight(w).layout() == Layout::kRowMajor);
  ops::cpu::set_bf16_hooks({});
}
