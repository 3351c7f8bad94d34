// The GGUF writer: the same keys and tensors as the gguf-py script that
// wrote tests/fixtures/gguf/writer_small.gguf give the same bytes; files of
// every type read back through the reader (and their quantized bytes are
// the ones given); ComfyUI-GGUF's reshaped form round trips to the real
// shape; a failed write leaves nothing behind.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "io/ggml_quants.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/half.h"
#include "temp_dir.h"

using namespace ditgen;
using namespace ditgen::io;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/gguf/";

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_gguf_writer") {}
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The values of writer_small.gguf's tensors: ((37 i) mod 101 - 50) / 8.
std::vector<float> formula(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((37 * i) % 101 - 50) / 8.0f;
  return v;
}

std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  uint64_t bytes = 0;
  REQUIRE(ggml_bytes(type, x.size(), bytes));
  std::vector<uint8_t> out(bytes);
  quantize(type, x.data(), static_cast<int64_t>(x.size()), out.data());
  return out;
}

GgufValue u(GgufValueType t, uint64_t v) { return GgufValue::unsigned_of(t, v); }
GgufValue s(GgufValueType t, int64_t v) { return GgufValue::signed_of(t, v); }

}  // namespace

TEST_CASE("gguf writer: the bytes gguf-py's GGUFWriter wrote for the same keys and tensors") {
  using T = GgufValueType;
  GgufWriter w("ditgen_test");
  w.set_alignment(64);
  w.add("test.u8", u(T::kU8, 200));
  w.add("test.i8", s(T::kI8, -100));
  w.add("test.u16", u(T::kU16, 60000));
  w.add("test.i16", s(T::kI16, -30000));
  w.add("test.u32", u(T::kU32, 4000000000u));
  w.add("test.i32", s(T::kI32, -2000000000));
  w.add("test.f32", GgufValue::float_of(T::kF32, 1.5));
  w.add("test.bool", u(T::kBool, 1));
  w.add("test.string", GgufValue::string_of("h\xc3\xa9llo"));
  w.add("test.u64", u(T::kU64, (uint64_t{1} << 40) + 3));
  w.add("test.i64", s(T::kI64, -(int64_t{1} << 40)));
  w.add("test.f64", GgufValue::float_of(T::kF64, 3.25));
  w.add("test.array_i32", GgufValue::array_of(T::kI32, {s(T::kI32, 1), s(T::kI32, -2), s(T::kI32, 3)}));
  w.add("test.array_f32",
        GgufValue::array_of(T::kF32, {GgufValue::float_of(T::kF32, 0.5), GgufValue::float_of(T::kF32, -1.0)}));
  w.add("test.array_str", GgufValue::array_of(T::kString, {GgufValue::string_of("a"), GgufValue::string_of("bc")}));
  w.add("test.array_bool", GgufValue::array_of(T::kBool, {u(T::kBool, 1), u(T::kBool, 0), u(T::kBool, 1)}));
  w.add("test.nested",
        GgufValue::array_of(T::kArray, {GgufValue::array_of(T::kI32, {s(T::kI32, 1), s(T::kI32, 2)}),
                                        GgufValue::array_of(T::kI32, {s(T::kI32, 3)})}));
  w.add_tensor("t.f32", GgmlType::kF32, {2, 3}, quantized(GgmlType::kF32, formula(6)));
  w.add_tensor("t.f16", GgmlType::kF16, {2, 32}, quantized(GgmlType::kF16, formula(64)));
  w.add_tensor("t.q8_0", GgmlType::kQ8_0, {2, 64}, quantized(GgmlType::kQ8_0, formula(128)));

  TempDir dir;
  const std::string path = dir.file("small.gguf");
  std::vector<std::string> progress;
  w.write(path, [&](size_t index, size_t count, const std::string& name) {
    progress.push_back(std::to_string(index) + "/" + std::to_string(count) + " " + name);
  });
  CHECK(progress == std::vector<std::string>{"0/3 t.f32", "1/3 t.f16", "2/3 t.q8_0"});
  const std::string ours = read_all(path), theirs = read_all(kFixtures + "writer_small.gguf");
  REQUIRE(ours.size() == theirs.size());
  size_t first = 0;
  while (first < ours.size() && ours[first] == theirs[first]) ++first;
  CHECK_MESSAGE(first == ours.size(), "first differing byte " << first);
}

TEST_CASE("gguf writer: every type, 5-D and reshaped tensors read back as written") {
  auto types = GgufFile::open(kFixtures + "types.gguf");
  TempDir dir;
  const std::string path = dir.file("round.gguf");
  GgufWriter w("wan");
  w.add("general.file_type", u(GgufValueType::kU32, 7));
  // The bytes of every type as gguf-py wrote them, in new shapes.
  for (const GgufTensor& t : types->tensors()) {
    const uint8_t* bytes = types->data(t.name);
    w.add_tensor(t.name, t.type, {int64_t(t.nbytes / math::ggml_traits(t.type).type_size), math::ggml_traits(t.type).block_size},
                 std::vector<uint8_t>(bytes, bytes + t.nbytes));
  }
  const std::vector<float> patch = formula(64 * 4 * 1 * 2 * 2);
  w.add_tensor("patch_embedding.weight", GgmlType::kF32, {64, 4, 1, 2, 2}, quantized(GgmlType::kF32, patch));
  const Shape conv_shape = {16, 4, 2, 2, 2};
  Shape stored;
  REQUIRE(GgufWriter::stored_shape_for(GgmlType::kQ4_0, conv_shape, stored));
  CHECK(stored == Shape{2, 256});
  const std::vector<float> conv = formula(512);
  w.add_reshaped_tensor("conv.weight", GgmlType::kQ4_0, conv_shape, stored, [&](uint8_t* out, uint64_t) {
    quantize(GgmlType::kQ4_0, conv.data(), 512, out);
  });
  w.write(path);

  auto f = GgufFile::open(path);
  CHECK(f->architecture() == "wan");
  CHECK(f->find("general.file_type")->u == 7);
  for (const GgufTensor& t : types->tensors()) {
    CAPTURE(t.name);
    const GgufTensor& back = f->tensor(t.name);
    CHECK(back.type == t.type);
    CHECK(back.nbytes == t.nbytes);
    CHECK(std::memcmp(f->data(t.name), types->data(t.name), t.nbytes) == 0);
    CHECK(back.offset % 32 == 0);
  }
  CHECK(f->tensor("patch_embedding.weight").shape == Shape{64, 4, 1, 2, 2});
  CHECK(f->load("patch_embedding.weight").to_vector() == patch);
  CHECK(f->tensor("conv.weight").ne == std::vector<uint64_t>{256, 2});
  CHECK(f->tensor("conv.weight").shape == conv_shape);
  const Tensor back = f->load("conv.weight");
  CHECK(back.shape() == conv_shape);
  std::vector<float> expected(512);
  dequantize(GgmlType::kQ4_0, quantized(GgmlType::kQ4_0, conv).data(), 0, 512, expected.data());
  CHECK(back.to_vector() == expected);

  Shape none;
  CHECK_FALSE(GgufWriter::stored_shape_for(GgmlType::kQ8_0, {3, 5}, none));  // 15 elements: no form
  CHECK(GgufWriter::stored_shape_for(GgmlType::kQ8_0, {3, 64}, none));
  CHECK(none == Shape{3, 64});
}

TEST_CASE("gguf writer: misuse is refused at the call, and a failed write leaves nothing behind") {
  GgufWriter w("x");
  CHECK_THROWS_AS(w.add("general.architecture", GgufValue::string_of("y")), std::invalid_argument);
  CHECK_THROWS_AS(w.set_alignment(24), std::invalid_argument);
  CHECK_THROWS_AS(w.add("bad", GgufValue::array_of(GgufValueType::kI32, {GgufValue::string_of("s")})),
                  std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("a", GgmlType::kQ4_K, {2, 100}, std::vector<uint8_t>{}), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("a", GgmlType::kQ8_0, {1, 32}, std::vector<uint8_t>(33)), std::invalid_argument);
  w.add_tensor("a", GgmlType::kQ8_0, {1, 32}, std::vector<uint8_t>(34));
  CHECK_THROWS_AS(w.add_tensor("a", GgmlType::kF32, {1}, std::vector<uint8_t>(4)), std::invalid_argument);
  w.add_tensor("b", GgmlType::kF32, {4}, [](uint8_t*, uint64_t) { throw std::runtime_error("source gone"); });

  TempDir dir;
  const std::string path = dir.file("out/failed.gguf");
  CHECK_THROWS_WITH(w.write(path), "source gone");
  CHECK_FALSE(std::filesystem::exists(path));
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path))
    CHECK_MESSAGE(!e.is_regular_file(), "left behind: " << e.path());  // no temporary file either
}
