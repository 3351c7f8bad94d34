// ggml's block formats against gguf-py (tests/fixtures/gguf, made by
// scripts/fixtures/make_gguf_fixtures.py): every type's dequantization bit
// for bit against gguf-py's dequantize() of the same file, over whole
// tensors, row bands and ranges cut inside blocks; the quantizers byte for
// byte against gguf-py's quantize() of the same float32 rows; the float16
// and float8 decoders of kernels/math/small_floats.h against the tensor
// layer's float16 conversion (all 65536 inputs) and torch's float8 decode
// (all 256 inputs of each format).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "io/ggml_quants.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "kernels/math/small_floats.h"
#include "tensor/half.h"

using namespace ditgen;
using namespace ditgen::io;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/gguf/";

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The index of the first element whose bits differ, or -1.
int64_t first_bit_difference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return i;
  return -1;
}

const char* const kReadTypes[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
                                  "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};

}  // namespace

TEST_CASE("ggml blocks: every read type dequantizes bit for bit as gguf-py") {
  auto file = GgufFile::open(kFixtures + "types.gguf");
  auto ref = SafetensorsFile::open(kFixtures + "types_ref.safetensors");
  std::vector<std::string> names(std::begin(kReadTypes), std::end(kReadTypes));
  names.push_back("q8_0_3d");
  for (const std::string& name : names) {
    CAPTURE(name);
    const Tensor expected = ref->load(name);
    const Tensor got = file->load_f32(name);
    REQUIRE(got.shape() == expected.shape());
    CHECK(first_bit_difference(got.data(), expected.data(), got.numel()) == -1);

    // Element ranges that begin and end inside blocks (a K-quant block is a
    // whole 256-element row here: 1..255 cut into it).
    const GgufTensor& t = file->tensor(name);
    for (auto [first, count] : {std::pair<int64_t, int64_t>{1, 300}, {255, 2}, {37, 320}, {97, 33}, {0, 1}}) {
      CAPTURE(first);
      REQUIRE(first + count <= got.numel());
      std::vector<float> out(static_cast<size_t>(count));
      dequantize(t.type, file->data(name), first, count, out.data());
      CHECK(first_bit_difference(out.data(), expected.data() + first, count) == -1);
    }
  }
  // Row bands of a 2-D tensor and of the 3-D one.
  const Tensor rows = file->load_rows("q4_k", 1, 3);
  CHECK(rows.shape() == Shape{2, 256});
  CHECK(first_bit_difference(rows.data(), ref->load("q4_k").data() + 256, 512) == -1);
  const Tensor band = file->load_rows("q8_0_3d", 1, 2);
  CHECK(band.shape() == Shape{1, 3, 64});
  CHECK(first_bit_difference(band.data(), ref->load("q8_0_3d").data() + 192, 192) == -1);
  // Columns, cut inside blocks.
  const Tensor cols = file->load_cols("q5_k", 100, 230);
  REQUIRE(cols.shape() == Shape{4, 130});
  const Tensor q5k = ref->load("q5_k");
  for (int64_t r = 0; r < 4; ++r) CHECK(first_bit_difference(cols.data() + 130 * r, q5k.data() + 256 * r + 100, 130) == -1);
}

TEST_CASE("ggml blocks: the quantizers write gguf-py's bytes") {
  auto file = GgufFile::open(kFixtures + "types.gguf");
  auto ref = SafetensorsFile::open(kFixtures + "types_ref.safetensors");
  const Tensor input = ref->load("quant_input");  // (4, 256): random rows and edge-case blocks
  REQUIRE(input.shape() == Shape{4, 256});
  for (const std::string name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}) {
    CAPTURE(name);
    const GgufTensor& t = file->tensor(name);
    REQUIRE(can_quantize(t.type));
    std::vector<uint8_t> out(t.nbytes);
    quantize(t.type, input.data(), input.numel(), out.data());
    const uint8_t* expected = file->data(name);
    size_t first = 0;
    while (first < out.size() && out[first] == expected[first]) ++first;
    CHECK_MESSAGE(first == out.size(), "first differing byte " << first);
  }
}

TEST_CASE("ggml blocks: quantizing refuses what it cannot write") {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  CHECK_THROWS_AS(quantize(GgmlType::kIQ2_XS, x.data(), 256, out.data()), std::invalid_argument);  // no quantizer
  CHECK_THROWS_AS(quantize(GgmlType::kQ8_1, x.data(), 32, out.data()), std::invalid_argument);
  CHECK_THROWS_AS(quantize(GgmlType::kQ8_0, x.data(), 48, out.data()), std::invalid_argument);  // 1.5 blocks
  x[40] = NAN;
  CHECK_THROWS_AS(quantize(GgmlType::kQ4_0, x.data(), 64, out.data()), std::invalid_argument);
  x[40] = INFINITY;
  CHECK_THROWS_AS(quantize(GgmlType::kQ8_0, x.data(), 64, out.data()), std::invalid_argument);
  quantize(GgmlType::kF16, x.data(), 64, out.data());  // the float types hold infinities
  CHECK((out[80] | out[81] << 8) == 0x7c00);
  std::vector<float> y(32);
  CHECK_THROWS_AS(dequantize(GgmlType::kIQ2_XS, out.data(), 0, 32, y.data()), std::invalid_argument);
  CHECK_THROWS_AS(dequantize(GgmlType::kQ8_1, out.data(), 0, 32, y.data()), std::invalid_argument);
}

TEST_CASE("ggml blocks: type names and sizes") {
  GgmlType t;
  REQUIRE(parse_ggml_type("q4_k", t));
  CHECK(t == GgmlType::kQ4_K);
  REQUIRE(parse_ggml_type("BF16", t));
  CHECK(t == GgmlType::kBF16);
  CHECK_FALSE(parse_ggml_type("q4_k_m", t));
  CHECK_FALSE(parse_ggml_type("", t));
  uint64_t bytes = 0;
  REQUIRE(ggml_bytes(GgmlType::kQ4_K, 512, bytes));
  CHECK(bytes == 288);
  REQUIRE(ggml_bytes(GgmlType::kQ5_1, 64, bytes));
  CHECK(bytes == 48);
  CHECK_FALSE(ggml_bytes(GgmlType::kQ6_K, 100, bytes));
  CHECK_FALSE(ggml_bytes(GgmlType::kF32, uint64_t{1} << 63, bytes));
  CHECK(whole_blocks(GgmlType::kQ8_0, 96));
  CHECK_FALSE(whole_blocks(GgmlType::kQ3_K, 96));
  CHECK(math::find_ggml_type(5) == nullptr);  // ggml's removed Q4_2
  CHECK(math::find_ggml_type(99) == nullptr);
  CHECK(math::ggml_traits(GgmlType::kQ2_K).type_size == 84);
  CHECK(math::ggml_traits(GgmlType::kQ3_K).type_size == 110);
  CHECK(math::ggml_traits(GgmlType::kQ6_K).type_size == 210);
}

TEST_CASE("small floats: float16 decoding matches the tensor layer on all 65536 inputs") {
  int64_t mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h)
    if (bits_of(math::f16_bits_to_f32(static_cast<uint16_t>(h))) != bits_of(f16_to_f32(static_cast<uint16_t>(h))))
      ++mismatches;
  CHECK(mismatches == 0);
}

TEST_CASE("small floats: float8 e4m3fn and e5m2 decode as torch, on all 256 inputs") {
  auto plain = SafetensorsFile::open(kFixtures + "fp8_plain.safetensors");
  auto ref = SafetensorsFile::open(kFixtures + "fp8_plain_ref.safetensors");
  CHECK(plain->info("all_e4m3").type == StoredType::kF8E4M3);
  CHECK(plain->info("all_e5m2").type == StoredType::kF8E5M2);
  for (const std::string name : {"all_e4m3", "all_e5m2", "w", "bias"}) {
    CAPTURE(name);
    const Tensor got = plain->load_f32(name), expected = ref->load(name);
    REQUIRE(got.shape() == expected.shape());
    CHECK(first_bit_difference(got.data(), expected.data(), got.numel()) == -1);
  }
  // The formats' landmarks, independently of torch.
  CHECK(math::f8e4m3fn_bits_to_f32(0x7e) == 448.0f);
  CHECK(math::f8e4m3fn_bits_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(std::isnan(math::f8e4m3fn_bits_to_f32(0xff)));
  CHECK(math::f8e5m2_bits_to_f32(0x7b) == 57344.0f);
  CHECK(std::isinf(math::f8e5m2_bits_to_f32(0xfc)));
  // load_rows and load_cols decode too.
  const Tensor row = plain->load_rows("all_e4m3", 3, 4);
  REQUIRE(row.shape() == Shape{1, 16});
  CHECK(first_bit_difference(row.data(), ref->load("all_e4m3").data() + 48, 16) == -1);
  const Tensor cols = plain->load_cols("w", 5, 9);
  const Tensor w = ref->load("w");
  REQUIRE(cols.shape() == Shape{8, 4});
  for (int64_t r = 0; r < 8; ++r) CHECK(first_bit_difference(cols.data() + 4 * r, w.data() + 32 * r + 5, 4) == -1);
}
