// The CPU linear layer on a weight in one of ggml's block formats (GGUF's
// Q8_0, Q4_K, ...: Layout::kBlockQuantized), against the same layer on the
// weight dequantized in full by io::dequantize (gguf-py's values,
// tests/io/test_ggml_blocks.cpp): float32 arithmetic to float rounding,
// bfloat16 arithmetic as the dequantized weight rounded to bfloat16 gives;
// several bands of rows (a tall weight), a bias, GELU, a strided output.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "io/ggml_quants.h"
#include "kernels/math/ggml_blocks.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;

namespace {

struct BlockWeight {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  Tensor blocks;     // (n, k) block-quantized, borrowing `bytes`
  Tensor dequantized;  // (n, k) float32: io::dequantize's values
};

BlockWeight quantized(math::GgmlType type, int64_t n, int64_t k, DType arithmetic, uint32_t seed) {
  const Tensor w = testing::random_tensor({n, k}, seed, -0.5f, 0.5f);
  uint64_t size = 0;
  REQUIRE(io::ggml_bytes(type, static_cast<uint64_t>(n * k), size));
  BlockWeight b;
  b.bytes = std::make_shared<std::vector<uint8_t>>(size);
  io::quantize(type, w.data(), n * k, b.bytes->data());
  b.blocks = Tensor::block_quantized(b.bytes->data(), size, static_cast<uint32_t>(type), {n, k}, arithmetic, b.bytes);
  b.dequantized = Tensor::empty({n, k});
  io::dequantize(type, b.bytes->data(), 0, n * k, b.dequantized.data());
  return b;
}

}  // namespace

TEST_CASE("block-quantized linear equals the linear on the dequantized weight (float32 and bfloat16 arithmetic)") {
  struct Case {
    math::GgmlType type;
    int64_t m, n, k;
    bool bias;
    ops::Activation act;
  };
  // n = 1500 rows of k = 1024: more than one band of rows (a band holds
  // 2^20 / k rows); a one-row input; GELU after a bias.
  for (const Case c : {Case{math::GgmlType::kQ8_0, 7, 1500, 1024, true, ops::Activation::kNone},
                       Case{math::GgmlType::kQ4_K, 33, 96, 512, true, ops::Activation::kGeluTanh},
                       Case{math::GgmlType::kQ6_K, 1, 70, 256, false, ops::Activation::kNone},
                       Case{math::GgmlType::kQ4_0, 5, 40, 64, true, ops::Activation::kNone}}) {
    for (const DType arithmetic : {DType::kF32, DType::kBF16}) {
      CAPTURE(math::ggml_traits(c.type).name);
      CAPTURE(dtype_name(arithmetic));
      CAPTURE(c.n);
      const BlockWeight w = quantized(c.type, c.n, c.k, arithmetic, 3 + static_cast<uint32_t>(c.n));
      CHECK(w.blocks.layout() == Layout::kBlockQuantized);
      CHECK(w.blocks.block_type() == static_cast<uint32_t>(c.type));
      CHECK_THROWS_AS(w.blocks.clone(), std::logic_error);
      const Tensor x = testing::random_tensor({c.m, c.k}, 17, -2.0f, 2.0f);
      const Tensor b = testing::random_tensor({c.n}, 19);
      const Tensor* bias = c.bias ? &b : nullptr;
      // The reference: the whole dequantized weight, in the same arithmetic.
      const Tensor ref = ops::linear(x, arithmetic == DType::kBF16 ? w.dequantized.to(DType::kBF16) : w.dequantized,
                                     bias, c.act);
      const Tensor got = ops::linear(x, w.blocks, bias, c.act);
      CHECK(testing::rel_l2(got, ref) < 2e-6);
      // Into columns [3, 3 + n) of a wider output.
      Tensor wide = Tensor::full({c.m, c.n + 5}, -9.0f);
      if (c.act == ops::Activation::kNone) {
        ops::linear_into(x, w.blocks, bias, wide, 3);
        // The same values to float rounding (a strided output may take
        // another of oneDNN's kernels, which sums in another order).
        double worst = 0, largest = 0;
        for (int64_t i = 0; i < c.m; ++i) {
          CHECK(wide[i * (c.n + 5)] == -9.0f);
          for (int64_t j = 0; j < c.n; ++j) {
            worst = std::max(worst, static_cast<double>(std::fabs(wide[i * (c.n + 5) + 3 + j] - got[i * c.n + j])));
            largest = std::max(largest, static_cast<double>(std::fabs(got[i * c.n + j])));
          }
        }
        CHECK(worst <= 1e-6 * largest);
      }
    }
  }
}

TEST_CASE("block-quantized weights are refused where only a CPU linear reads them") {
  auto bytes = std::make_shared<std::vector<uint8_t>>(34 * 2);
  const Tensor w = Tensor::block_quantized(bytes->data(), bytes->size(), static_cast<uint32_t>(math::GgmlType::kQ8_0),
                                           {2, 32}, DType::kF32, bytes);
  Tensor c = Tensor::zeros({3, 2});
  CHECK_THROWS_AS(ops::gemm(false, true, 1.0f, Tensor::zeros({3, 32}), w, 0.0f, c), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::block_quantized(bytes->data(), bytes->size(), 8, {2, 32}, DType::kF16, bytes),
                  std::invalid_argument);
  CHECK(w.with_arithmetic(DType::kBF16).dtype() == DType::kBF16);
  CHECK_THROWS_AS(Tensor::zeros({2}).with_arithmetic(DType::kBF16), std::logic_error);
}

TEST_CASE("dequantize_gemm_weight on the CPU: the blocks' values in float32, rounded once to bfloat16 / float16") {
  const BlockWeight w = quantized(math::GgmlType::kQ5_K, 9, 512, DType::kF32, 29);
  const Tensor f32 = ops::dequantize_gemm_weight(w.blocks);
  CHECK(f32.layout() == Layout::kRowMajor);
  CHECK(f32.shape() == Shape{9, 512});
  CHECK(f32.to_vector() == w.dequantized.to_vector());  // io::dequantize's (gguf-py's) values
  for (const DType t : {DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(t));
    const Tensor got = ops::dequantize_gemm_weight(w.blocks, t);
    REQUIRE(got.dtype() == t);
    CHECK(std::memcmp(got.raw(), w.dequantized.to(t).raw(), got.nbytes()) == 0);
  }
  // Not a block weight, not a floating result, bytes that hold no (9, 512) Q5_K weight.
  CHECK_THROWS_AS(ops::dequantize_gemm_weight(w.dequantized), std::invalid_argument);
  CHECK_THROWS_AS(ops::dequantize_gemm_weight(w.blocks, DType::kI32), std::invalid_argument);
  const Tensor short_of_a_byte = Tensor::block_quantized(w.bytes->data(), w.bytes->size() - 1,
                                                         w.blocks.block_type(), {9, 512}, DType::kF32, w.bytes);
  CHECK_THROWS_WITH_AS(ops::dequantize_gemm_weight(short_of_a_byte),
                       "dequantize_gemm_weight: 3167 bytes of Q5_K blocks are no [9, 512] weight",
                       std::invalid_argument);
}

TEST_CASE("a block weight's blocks move between devices as they are, and a row-major tensor has none") {
  const BlockWeight w = quantized(math::GgmlType::kQ8_0, 4, 64, DType::kBF16, 31);
  CHECK(w.blocks.blocks_to(Device::kCPU).raw() == w.blocks.raw());  // already there: itself
  CHECK_THROWS_AS(w.dequantized.blocks_to(Device::kCPU), std::logic_error);
  const Tensor f32 = w.blocks.with_arithmetic(DType::kF32);
  CHECK(f32.device() == Device::kCPU);
  CHECK(f32.raw() == w.blocks.raw());
}
