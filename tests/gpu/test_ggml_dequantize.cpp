// The CUDA GGUF block dequantization (kernels/cuda/ggml_dequantize.cu)
// through the op front end (ops::dequantize_gemm_weight on blocks uploaded
// by Tensor::blocks_to) against the CPU's block arithmetic
// (math::dequantize_blocks, itself bit-identical to gguf-py's): float32 bit
// for bit, bfloat16 and float16 as the CPU's float32 rounded once to
// nearest even (Tensor::to). Every type ditgen reads, from io::quantize of
// random values, and the block types also from random bytes whose float16
// scales are set finite (every bit pattern of the packed values and
// sub-scales: negative Q6_K scales, Q3_K's high bits, Q4_K's packed 6-bit
// pairs). Then the loading path: a linear on a block weight placed on CUDA
// (models::Placement::matrix) against the CPU linear on the same blocks, at
// test_gemm.cpp's tolerances; and a Q4_K GGUF file's weight loaded to CUDA
// by models::load_matrix: its values, and its file pages released.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test_helpers.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "kernels/math/ggml_blocks.h"
#include "mapping.h"
#include "models/placement.h"
#include "ops/ops.h"
#include "temp_dir.h"

using namespace ditgen;
using math::GgmlType;

namespace {

constexpr Device kCUDA = Device::kCUDA;

// The block types, and where their float16 scales lie in a block
// (ggml-quants.h's block structs).
struct BlockType {
  GgmlType type;
  std::vector<int> scale_offsets;
};
const std::vector<BlockType>& block_types() {
  static const std::vector<BlockType> types = {
      {GgmlType::kQ4_0, {0}},       {GgmlType::kQ4_1, {0, 2}}, {GgmlType::kQ5_0, {0}},
      {GgmlType::kQ5_1, {0, 2}},    {GgmlType::kQ8_0, {0}},    {GgmlType::kQ2_K, {80, 82}},
      {GgmlType::kQ3_K, {108}},     {GgmlType::kQ4_K, {0, 2}}, {GgmlType::kQ5_K, {0, 2}},
      {GgmlType::kQ6_K, {208}},
  };
  return types;
}

// A (rows, k) block-quantized CPU weight over its own bytes.
Tensor block_weight(GgmlType type, int64_t rows, int64_t k, std::shared_ptr<std::vector<uint8_t>> bytes) {
  REQUIRE(math::ggml_matrix_bytes(static_cast<uint32_t>(type), rows, k) == static_cast<int64_t>(bytes->size()));
  return Tensor::block_quantized(bytes->data(), bytes->size(), static_cast<uint32_t>(type), {rows, k}, DType::kF32,
                                 bytes);
}

// io::quantize's blocks of random values in [-0.5, 0.5).
Tensor quantized_weight(GgmlType type, int64_t rows, int64_t k, uint32_t seed) {
  const Tensor values = testing::random_tensor({rows, k}, seed, -0.5f, 0.5f);
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      static_cast<size_t>(math::ggml_matrix_bytes(static_cast<uint32_t>(type), rows, k)));
  io::quantize(type, values.data(), rows * k, bytes->data());
  return block_weight(type, rows, k, bytes);
}

// Random bytes, each block's float16 scales then made finite (an exponent
// of all ones loses its top bit): subnormal, negative and large scales too.
Tensor random_byte_weight(const BlockType& bt, int64_t rows, int64_t k, uint32_t seed) {
  const math::GgmlTypeTraits& traits = math::ggml_traits(bt.type);
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      static_cast<size_t>(math::ggml_matrix_bytes(static_cast<uint32_t>(bt.type), rows, k)));
  std::mt19937 rng(seed);
  for (uint8_t& b : *bytes) b = static_cast<uint8_t>(rng());
  for (size_t block = 0; block < bytes->size(); block += static_cast<size_t>(traits.type_size))
    for (int at : bt.scale_offsets) {
      uint8_t* p = bytes->data() + block + at;
      if (((p[1] >> 2) & 0x1f) == 0x1f) p[1] &= static_cast<uint8_t>(~0x40);
    }
  return block_weight(bt.type, rows, k, bytes);
}

// The CPU's values of a block weight: math::dequantize_blocks over all of it.
Tensor cpu_values(const Tensor& w) {
  Tensor out = Tensor::empty(w.shape());
  const int64_t blocks = w.numel() / math::ggml_traits(static_cast<GgmlType>(w.block_type())).block_size;
  REQUIRE(math::dequantize_blocks(static_cast<GgmlType>(w.block_type()), static_cast<const uint8_t*>(w.raw()), blocks,
                                  out.data()));
  return out;
}

// The first element at which two CPU tensors of one dtype differ in their
// bits, or -1 when they hold the same bytes.
int64_t first_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.numel() == b.numel());
  const auto* pa = static_cast<const uint8_t*>(a.raw());
  const auto* pb = static_cast<const uint8_t*>(b.raw());
  const size_t size = a.element_size();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(pa + i * size, pb + i * size, size) != 0) return i;
  return -1;
}

// w dequantized on CUDA into each dtype, against the CPU's values rounded to it.
void check_on_cuda(const Tensor& w) {
  const Tensor on_device = w.blocks_to(kCUDA);
  CHECK(on_device.device() == kCUDA);
  CHECK(on_device.layout() == Layout::kBlockQuantized);
  CHECK(on_device.nbytes() == w.nbytes());
  // The blocks travel as they are.
  const Tensor back = on_device.blocks_to(Device::kCPU);
  CHECK(std::memcmp(back.raw(), w.raw(), w.nbytes()) == 0);
  const Tensor ref = cpu_values(w);
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_name(t));
    const Tensor got = ops::dequantize_gemm_weight(on_device, t);
    CHECK(got.device() == kCUDA);
    CHECK(got.dtype() == t);
    CHECK(got.layout() == Layout::kRowMajor);
    CHECK(got.shape() == w.shape());
    CHECK(first_difference(got.to(Device::kCPU, t), ref.to(t)) == -1);
  }
}

}  // namespace

TEST_CASE("cuda dequantize_gemm_weight equals the CPU's block arithmetic bit for bit (blocks from io::quantize)") {
  // 131 rows of 3 blocks: several tiles, the last one partial.
  for (const math::GgmlTypeTraits& traits : math::kGgmlTypes) {
    if (!traits.dequantized) continue;
    CAPTURE(traits.name);
    check_on_cuda(quantized_weight(traits.type, 131, 3 * traits.block_size, 7));
  }
}

TEST_CASE("cuda dequantize_gemm_weight equals the CPU's block arithmetic bit for bit (random bytes, finite scales)") {
  for (const BlockType& bt : block_types()) {
    const math::GgmlTypeTraits& traits = math::ggml_traits(bt.type);
    CAPTURE(traits.name);
    for (const int64_t rows : {1, 131}) check_on_cuda(random_byte_weight(bt, rows, 3 * traits.block_size, 11));
  }
}

TEST_CASE("a linear on a block weight placed on CUDA matches the CPU linear on the same blocks") {
  const int64_t n = 45;
  for (const BlockType& bt : block_types()) {
    const int64_t k = 2 * math::ggml_traits(bt.type).block_size;
    const Tensor blocks = quantized_weight(bt.type, n, k, 13);
    for (DType t : gputest::kAllTypes)
      for (int64_t m : {1, 19}) {
        CAPTURE(math::ggml_traits(bt.type).name);
        CAPTURE(dtype_name(t));
        CAPTURE(m);
        const models::Placement place(kCUDA, t);
        const Tensor w = place.matrix(blocks, "blocks.0.attn1.to_q.weight");
        CHECK(w.device() == kCUDA);
        CHECK(w.dtype() == t);
        CHECK(w.layout() == Layout::kRowMajor);
        const Tensor x = gputest::rounded(testing::random_tensor({m, k}, 17), t);
        const Tensor bias = gputest::rounded(testing::random_tensor({n}, 19), t);
        const Tensor bias_on_device = bias.to(kCUDA, t);
        const Tensor got = ops::linear(x.to(kCUDA, t), w, &bias_on_device).to(Device::kCPU, DType::kF32);
        const Tensor ref = ops::linear(x, blocks, &bias);  // the CPU's block GEMM, float32 arithmetic
        CHECK(testing::rel_l2(got, ref) < gputest::tolerance(t));
      }
  }
}

TEST_CASE("a Q4_K GGUF weight loaded to CUDA: dequantized there, its file pages released") {
  testing::TempDir tmp("gguf_cuda");
  const std::string file = tmp.file("q4_k.gguf");
  const int64_t rows = 1024, k = 4096;  // 2.25 MiB of Q4_K blocks
  const Tensor blocks = quantized_weight(GgmlType::kQ4_K, rows, k, 23);
  const auto* first = static_cast<const uint8_t*>(blocks.raw());
  io::GgufWriter writer("wan");
  writer.add_tensor("w", GgmlType::kQ4_K, {rows, k}, std::vector<uint8_t>(first, first + blocks.nbytes()));
  writer.write(file);

  const io::WeightStore store = io::WeightStore::open_file(file);
  const std::optional<Tensor> view = store.load_block_rows("w", 0, rows, DType::kF32);
  REQUIRE(view);
  testing::touch_pages(view->raw(), view->nbytes());
  REQUIRE(testing::mapping_rss(view->raw()) >= static_cast<int64_t>(view->nbytes()));

  const Tensor placed = models::load_matrix(store, "w", models::Placement(kCUDA, DType::kBF16));
  CHECK(placed.device() == kCUDA);
  CHECK(placed.dtype() == DType::kBF16);
  CHECK(placed.shape() == Shape{rows, k});
  // Read from the file once, for the upload: its pages are gone.
  CHECK(testing::mapping_rss(view->raw()) <= 64 * 1024);
  CHECK(first_difference(placed.to(Device::kCPU, DType::kBF16), cpu_values(blocks).to(DType::kBF16)) == -1);
}
