// GEMMs with 16-bit weights on the CPU: ops::linear, linear_into and gemm
// given a bfloat16 or float16 weight (as mmapped from a checkpoint) against
// the float32 op on the same weight widened beforehand by Tensor::to.
//
// Bit for bit when the weight fits one block of the scratch (~1M floats:
// every weight of the test fixtures): the widening is exact (every bfloat16
// / float16 value is a float32), so sgemm / sgemv get the very call the
// float32 path makes. Within 1e-6 relative L2 when it takes several blocks:
// each output is still one dot product over all of K, but OpenBLAS's
// kernels and thread split depend on N (remainder tiles, rows per thread),
// so a block of N's columns may sum some products in another order (the
// float32 path itself differs that way between thread counts). gemm with an
// untransposed b splits K across blocks, which also reorders the sum.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>

#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("linear with a bfloat16 / float16 weight equals float32 linear on the widened weight") {
  struct Case {
    Shape x;
    int64_t n;
  };
  // Odd shapes; one row (the GEMV path); more weight rows than one scratch block.
  const Case cases[] = {{{3, 7}, 5}, {{1, 33}, 17}, {{2, 5, 64}, 130}, {{1, 1000}, 2500}, {{9, 1000}, 2200}};
  uint32_t seed = 10;
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(t));
      CAPTURE(shape_str(c.x));
      CAPTURE(c.n);
      const int64_t k = c.x.back();
      const Tensor x = random_tensor(c.x, ++seed);
      const Tensor w16 = random_tensor({c.n, k}, ++seed).to(t);
      const Tensor w32 = w16.to(DType::kF32);
      const Tensor bias = random_tensor({c.n}, ++seed);
      REQUIRE(w16.dtype() == t);
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
}

TEST_CASE("linear with a 16-bit weight matches a double-precision loop over the widened weight") {
  const Tensor x = random_tensor({4, 19}, 1), w = random_tensor({11, 19}, 2).to(DType::kBF16);
  const Tensor bias = random_tensor({11}, 3);
  const std::vector<float> wf = w.to_vector();
  std::vector<double> ref(4 * 11);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 11; ++j) {
      double acc = bias[j];
      for (int64_t p = 0; p < 19; ++p) acc += static_cast<double>(x[i * 19 + p]) * wf[j * 19 + p];
      ref[i * 11 + j] = acc;
    }
  CHECK(rel_l2(ops::linear(x, w, &bias), ref) < 1e-6);
}

TEST_CASE("gemm with a 16-bit b: one block bit for bit, several within 1e-6") {
  const int64_t m = 6, n = 700, k = 1600;  // two blocks either way (1.12M elements)
  for (DType t : {DType::kBF16, DType::kF16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(dtype_name(t));
        CAPTURE(ta);
        CAPTURE(tb);
        const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 4);
        const Tensor b16 = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 5).to(t);
        const Tensor b32 = b16.to(DType::kF32);
        Tensor c16 = random_tensor({m, n}, 6), c32 = c16.clone();
        ops::gemm(ta, tb, 0.5f, a, b16, 2.0f, c16);
        ops::gemm(ta, tb, 0.5f, a, b32, 2.0f, c32);
        CHECK(rel_l2(c16, c32) < 1e-6);
        Tensor d16 = random_tensor({m, 30}, 7), d32 = d16.clone();  // one block: the same sgemm call
        const Tensor small = random_tensor(tb ? Shape{30, k} : Shape{k, 30}, 8).to(t);
        ops::gemm(ta, tb, 0.5f, a, small, 2.0f, d16);
        ops::gemm(ta, tb, 0.5f, a, small.to(DType::kF32), 2.0f, d32);
        CHECK(same_bits(d16, d32));
      }
  // a and c stay float32.
  Tensor c = Tensor::zeros({2, 2});
  CHECK_THROWS_AS(ops::gemm(false, false, 1.0f, Tensor::zeros({2, 2}, Device::kCPU, DType::kBF16),
                            Tensor::zeros({2, 2}), 0.0f, c),
                  std::invalid_argument);
}
