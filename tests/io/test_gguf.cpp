// The GGUF reader: the fixtures gguf-py wrote (tests/fixtures/gguf) read
// back with every metadata value, shape and tensor as gguf-py (and
// ComfyUI-GGUF's loader, for the Wan conventions) reads them; hostile files
// assembled byte by byte (tests/io/gguf_bytes.h) and every truncation of
// the fixtures fail with a ModelError naming the file and the key or tensor
// at fault, never a crash or an overread.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "gguf_bytes.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "mapping.h"
#include "temp_dir.h"

using namespace ditgen;
using namespace ditgen::io;
using testing::contains;
using testing::GgufBytes;
using testing::model_error_of;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/gguf/";

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_gguf") {}
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// value(i) = ((37 i) mod 101 - 50) / 8, the values of writer_small.gguf's tensors.
float formula(int64_t i) { return static_cast<float>((37 * i) % 101 - 50) / 8.0f; }

void check_writer_small(const GgufFile& f) {
  CHECK(f.alignment() == 64);
  CHECK(f.architecture() == "ditgen_test");
  REQUIRE(f.metadata().size() == 19);
  CHECK(f.metadata()[0].first == "general.architecture");  // gguf-py writes it first
  CHECK(f.metadata()[1].first == "general.alignment");
  auto u = [&](const char* key, GgufValueType type) {
    const GgufValue* v = f.find(key);
    REQUIRE(v);
    CHECK(v->type == type);
    return v->u;
  };
  auto i = [&](const char* key, GgufValueType type) {
    const GgufValue* v = f.find(key);
    REQUIRE(v);
    CHECK(v->type == type);
    return v->i;
  };
  CHECK(u("test.u8", GgufValueType::kU8) == 200);
  CHECK(i("test.i8", GgufValueType::kI8) == -100);
  CHECK(u("test.u16", GgufValueType::kU16) == 60000);
  CHECK(i("test.i16", GgufValueType::kI16) == -30000);
  CHECK(u("test.u32", GgufValueType::kU32) == 4000000000u);
  CHECK(i("test.i32", GgufValueType::kI32) == -2000000000);
  CHECK(u("test.u64", GgufValueType::kU64) == (uint64_t{1} << 40) + 3);
  CHECK(i("test.i64", GgufValueType::kI64) == -(int64_t{1} << 40));
  CHECK(u("test.bool", GgufValueType::kBool) == 1);
  CHECK(f.find("test.f32")->type == GgufValueType::kF32);
  CHECK(f.find("test.f32")->f == 1.5);
  CHECK(f.find("test.f64")->type == GgufValueType::kF64);
  CHECK(f.find("test.f64")->f == 3.25);
  CHECK(f.find("test.string")->s == "h\xc3\xa9llo");
  const GgufValue* ints = f.find("test.array_i32");
  REQUIRE(ints->type == GgufValueType::kArray);
  CHECK(ints->element_type == GgufValueType::kI32);
  REQUIRE(ints->items.size() == 3);
  CHECK(ints->items[1].i == -2);
  const GgufValue* strs = f.find("test.array_str");
  REQUIRE(strs->items.size() == 2);
  CHECK(strs->items[1].s == "bc");
  CHECK(f.find("test.array_f32")->items[1].f == -1.0);
  CHECK(f.find("test.array_bool")->items[1].u == 0);
  const GgufValue* nested = f.find("test.nested");
  REQUIRE(nested->element_type == GgufValueType::kArray);
  REQUIRE(nested->items.size() == 2);
  CHECK(nested->items[0].element_type == GgufValueType::kI32);
  REQUIRE(nested->items[0].items.size() == 2);
  CHECK(nested->items[0].items[1].i == 2);
  REQUIRE(nested->items[1].items.size() == 1);
  CHECK(nested->items[1].items[0].i == 3);
  CHECK(f.find("absent") == nullptr);

  REQUIRE(f.tensors().size() == 3);
  CHECK(f.tensors()[0].name == "t.f32");  // file order
  CHECK(f.names() == std::vector<std::string>{"t.f16", "t.f32", "t.q8_0"});
  const Tensor a = f.load("t.f32");
  REQUIRE(a.shape() == Shape{2, 3});
  for (int64_t k = 0; k < 6; ++k) CHECK(a[k] == formula(k));
  const Tensor h = f.load("t.f16");
  CHECK(h.dtype() == DType::kF16);  // as stored
  const Tensor hf = h.to(DType::kF32);
  for (int64_t k = 0; k < 64; ++k) CHECK(hf[k] == formula(k));  // eighths: exact in float16
  const Tensor q = f.load("t.q8_0");
  REQUIRE(q.shape() == Shape{2, 64});
  for (int64_t k = 0; k < 128; ++k) CHECK(std::fabs(q[k] - formula(k)) <= 6.25f / 127);  // half a step of d = max/127
  CHECK(f.tensor("t.q8_0").offset % 64 == 0);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("gguf: every metadata value type, nested arrays, alignment and tensors of a gguf-py file") {
  auto f = GgufFile::open(kFixtures + "writer_small.gguf");
  CHECK(f->version() == 3);
  check_writer_small(*f);
}

TEST_CASE("gguf: version 2 files read as version 3") {
  auto f = GgufFile::open(kFixtures + "small_v2.gguf");
  CHECK(f->version() == 2);
  check_writer_small(*f);
}

TEST_CASE("gguf: shapes are ggml's dimensions reversed, and float types borrow from the mapping") {
  const std::string path = kFixtures + "types.gguf";
  auto f = GgufFile::open(path);
  CHECK(f->alignment() == 32);
  const GgufTensor& t3 = f->tensor("q8_0_3d");
  CHECK(t3.ne == std::vector<uint64_t>{64, 3, 2});
  CHECK(t3.shape == Shape{2, 3, 64});
  CHECK(t3.nbytes == 6 * 2 * 34);
  const TensorInfo& info = f->info("q4_k");
  CHECK(info.shape == Shape{4, 256});
  CHECK(info.type == StoredType::kF32);  // what load() gives
  REQUIRE(info.ggml_type);
  CHECK(*info.ggml_type == math::GgmlType::kQ4_K);
  CHECK(element_type_name(info) == "Q4_K");
  CHECK(info.end - info.begin == 4 * 144);
  CHECK(f->info("bf16").type == StoredType::kBF16);
  for (const char* name : {"f32", "f16", "bf16"}) {
    CAPTURE(std::string(name));
    const Tensor t = f->load(name);
    CHECK(testing::points_into_mapping_of(t.raw(), path));  // zero copy
    CHECK(f->load_rows(name, 1, 3).raw() == static_cast<const char*>(t.raw()) + 256 * t.element_size());
  }
  CHECK(f->load("f16").dtype() == DType::kF16);
  CHECK(f->load("bf16").dtype() == DType::kBF16);
  CHECK_FALSE(testing::points_into_mapping_of(f->load("q8_0").raw(), path));  // dequantized
  CHECK(f->load_rows("q6_k", 2, 2).shape() == Shape{0, 256});
  CHECK(contains(model_error_of([&] { f->load_rows("q6_k", 3, 5); }), "tensor 'q6_k'"));
  CHECK(contains(model_error_of([&] { f->load_cols("q8_0_3d", 0, 1); }), "tensor 'q8_0_3d'"));
  const std::string missing = model_error_of([&] { f->load("nope"); });
  CHECK(contains(missing, path));
  CHECK(contains(missing, "missing tensor 'nope'"));
}

TEST_CASE("gguf: ComfyUI-GGUF's Wan layout: 5-D patch embedding, 3-D modulation, comfy.gguf.orig_shape") {
  auto f = GgufFile::open(kFixtures + "wan_layout.gguf");
  auto ref = SafetensorsFile::open(kFixtures + "wan_layout_ref.safetensors");
  CHECK(f->architecture() == "wan");
  CHECK(f->tensor("patch_embedding.weight").shape == Shape{64, 4, 1, 2, 2});
  CHECK(f->tensor("blocks.0.modulation").shape == Shape{1, 6, 64});
  const GgufTensor& conv = f->tensor("conv.weight");
  CHECK(conv.ne == std::vector<uint64_t>{256, 2});  // stored as rows of 256
  CHECK(conv.shape == Shape{16, 4, 2, 2, 2});       // read with its real shape
  CHECK(f->info("conv.weight").shape == Shape{16, 4, 2, 2, 2});
  for (const std::string& name : ref->names()) {
    CAPTURE(name);
    CHECK(same_bits(f->load_f32(name), ref->load(name)));
  }
  // Rows of the real shape, not of the stored one.
  const Tensor rows = f->load_rows("conv.weight", 5, 9);
  CHECK(rows.shape() == Shape{4, 4, 2, 2, 2});
  CHECK(std::memcmp(rows.raw(), ref->load("conv.weight").data() + 5 * 32, 4 * 32 * 4) == 0);
}

TEST_CASE("gguf: hostile headers fail with ModelError naming the file and the key or tensor") {
  TempDir dir;
  struct Case {
    const char* what;
    std::string bytes;
    std::string names;     // the key or tensor the message must name ("" for header problems)
    const char* contains;  // a distinctive part of the message
  };
  const std::vector<uint8_t> q8_block(34, 0);
  auto one_tensor = [](const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset, uint64_t data_bytes) {
    GgufBytes b;
    b.header(3, 1, 0).tensor("w", ne, type, offset).pad();
    b.bytes.append(data_bytes, '\0');
    return b.bytes;
  };
  auto one_kv = [](const std::function<void(GgufBytes&)>& kv) {
    GgufBytes b;
    b.header(3, 0, 1);
    kv(b);
    return b.bytes;
  };
  std::string big_endian = GgufBytes().raw("GGUF").bytes;
  big_endian += std::string("\0\0\0\3", 4);
  big_endian += std::string(16, '\0');
  std::string deep = GgufBytes().header(3, 0, 1).key("deep", 9).bytes;
  for (int level = 0; level < 9; ++level) deep += GgufBytes().u32(9).u64(1).bytes;
  deep += GgufBytes().u32(4).u64(0).bytes;
  const std::vector<Case> cases = {
      {"empty file", "", "", "needs 4 bytes"},
      {"bad magic", "GGML" + std::string(20, '\0'), "", "not a GGUF file"},
      {"version 1", GgufBytes().header(1, 0, 0).bytes, "", "GGUF version 1 is not supported"},
      {"version 4", GgufBytes().header(4, 0, 0).bytes, "", "GGUF version 4 is not supported"},
      {"big endian", big_endian, "", "big-endian"},
      {"header cut short", GgufBytes().raw("GGUF").u32(3).u64(0).bytes, "", "truncated"},
      {"tensor count beyond the file", GgufBytes().header(3, uint64_t{1} << 60, 0).bytes, "", "tensors cannot fit"},
      {"key/value count beyond the file", GgufBytes().header(3, 0, uint64_t{1} << 61).bytes, "", "key/value pairs"},
      {"key length beyond the file", GgufBytes().header(3, 0, 1).u64(uint64_t{1} << 62).raw("abcdefgh").bytes, "metadata key #0",
       "truncated"},
      {"unknown value type", one_kv([](GgufBytes& b) { b.key("k", 13).u32(0); }), "metadata key 'k'",
       "unknown value type 13"},
      {"string beyond the file", one_kv([](GgufBytes& b) { b.key("k", 8).u64(1000).raw("ab"); }), "metadata key 'k'",
       "truncated"},
      {"array count beyond the file", one_kv([](GgufBytes& b) { b.key("k", 9).u32(10).u64(uint64_t{1} << 60); }),
       "metadata key 'k'", "cannot fit"},
      {"array of unknown type", one_kv([](GgufBytes& b) { b.key("k", 9).u32(77).u64(0); }), "metadata key 'k'",
       "unknown value type 77"},
      {"arrays nested too deep", deep, "metadata key 'deep'", "nested"},
      {"duplicate key", GgufBytes().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes, "metadata key 'k'",
       "appears twice"},
      {"alignment of the wrong type", one_kv([](GgufBytes& b) { b.key("general.alignment", 10).u64(32); }),
       "general.alignment", "must be UINT32"},
      {"alignment not a power of two", one_kv([](GgufBytes& b) { b.kv_u32("general.alignment", 48); }),
       "general.alignment", "not a power of two"},
      {"alignment zero", one_kv([](GgufBytes& b) { b.kv_u32("general.alignment", 0); }), "general.alignment",
       "not a power of two"},
      {"architecture not a string", one_kv([](GgufBytes& b) { b.kv_u32("general.architecture", 7); }),
       "general.architecture", "must be STRING"},
      {"nine dimensions", one_tensor(std::vector<uint64_t>(9, 1), 0, 0, 4), "tensor 'w'", "9 dimensions"},
      {"dimensions overflowing", one_tensor({uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0, 0), "tensor 'w'",
       "overflows"},
      {"dimension above INT64_MAX", one_tensor({uint64_t{1} << 63}, 0, 0, 0), "tensor 'w'", "overflows"},
      {"byte size overflowing", one_tensor({uint64_t{1} << 62, 2}, 0, 0, 0), "tensor 'w'", "overflows"},
      {"removed ggml type", one_tensor({32}, 4, 0, 34), "tensor 'w'", "unknown ggml type 4"},
      {"unknown ggml type", one_tensor({32}, 99, 0, 34), "tensor 'w'", "unknown ggml type 99"},
      {"row not whole blocks", one_tensor({100, 2}, 12, 0, 1000), "tensor 'w'", "not a whole number of Q4_K blocks"},
      {"offset not aligned", one_tensor({32}, 8, 2, 64), "tensor 'w'", "not a multiple of the alignment 32"},
      {"data beyond the file", one_tensor({64}, 8, 0, 34), "tensor 'w'", "end beyond the data section"},
      {"offset far beyond the file", one_tensor({32}, 8, uint64_t{1} << 62, 34), "tensor 'w'",
       "end beyond the data section"},
      {"duplicate tensor",
       GgufBytes().header(3, 2, 0).tensor("w", {32}, 8, 0).tensor("w", {32}, 8, 64).pad().bytes + std::string(128, '\0'),
       "tensor 'w'", "appears twice"},
      {"overlapping tensors",
       GgufBytes().header(3, 2, 0).tensor("a", {64}, 8, 0).tensor("b", {32}, 8, 64).pad().bytes + std::string(128, '\0'),
       "'a' and 'b'", "overlap"},
      {"orig_shape of the wrong size",
       GgufBytes().header(3, 1, 1).key("comfy.gguf.orig_shape.w", 9).u32(5).u64(2).u32(3).u32(11).tensor("w", {32}, 8, 0)
               .pad().bytes + std::string(34, '\0'),
       "comfy.gguf.orig_shape.w", "holds 33 elements"},
      {"orig_shape not integers",
       GgufBytes().header(3, 1, 1).key("comfy.gguf.orig_shape.w", 9).u32(8).u64(1).str("32").tensor("w", {32}, 8, 0)
               .pad().bytes + std::string(34, '\0'),
       "comfy.gguf.orig_shape.w", "non-negative integers"},
      {"orig_shape not an array",
       GgufBytes().header(3, 1, 1).kv_u32("comfy.gguf.orig_shape.w", 32).tensor("w", {32}, 8, 0).pad().bytes +
           std::string(34, '\0'),
       "comfy.gguf.orig_shape.w", "expected an array"},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    CAPTURE(std::string(c.what));
    const std::string path = dir.file("case" + std::to_string(k) + ".gguf");
    write_file(path, c.bytes);
    const std::string msg = model_error_of([&] { GgufFile::open(path); });
    CHECK(contains(msg, path));
    CHECK_MESSAGE(contains(msg, c.contains), msg);
    if (!c.names.empty()) CHECK_MESSAGE(contains(msg, c.names), msg);
  }
}

TEST_CASE("gguf: a type ditgen does not read opens, and its load names the tensor and type") {
  TempDir dir;
  const std::string path = dir.file("iq.gguf");
  GgufBytes b;
  b.header(3, 2, 0).tensor("iq", {256}, 17, 0).tensor("f", {4}, 0, 96).pad();  // IQ2_XS: 74 bytes a block
  b.bytes.append(96 + 16, '\0');
  write_file(path, b.bytes);
  auto f = GgufFile::open(path);
  CHECK(f->tensor("iq").nbytes == 74);
  CHECK(element_type_name(f->info("iq")) == "IQ2_XS");
  const std::string msg = model_error_of([&] { f->load("iq"); });
  CHECK(contains(msg, path));
  CHECK(contains(msg, "tensor 'iq' has ggml type IQ2_XS"));
  CHECK(f->load("f").shape() == Shape{4});
}

TEST_CASE("gguf: every truncation of a fixture fails cleanly or, cut only in the final padding, reads whole") {
  TempDir dir;
  for (const char* fixture : {"writer_small.gguf", "wan_layout.gguf"}) {
    const std::string bytes = read_all(kFixtures + fixture);
    auto whole = GgufFile::open(kFixtures + fixture);
    int opened = 0, refused = 0;
    const std::string path = dir.file("cut.gguf");
    for (size_t n = 0; n < bytes.size(); ++n) {
      write_file(path, bytes.substr(0, n));
      std::shared_ptr<GgufFile> f;
      const std::string msg = model_error_of([&] { f = GgufFile::open(path); });
      if (msg == "<no exception>") {
        ++opened;
        for (const GgufTensor& t : f->tensors()) f->load_f32(t.name);  // every tensor whole
      } else {
        ++refused;
        CHECK_MESSAGE(contains(msg, path), msg);
      }
    }
    CAPTURE(std::string(fixture));
    CHECK(refused > 0);
    // gguf-py pads the last tensor to the alignment: only cuts in that padding open.
    CHECK(opened < static_cast<int>(whole->alignment()));
  }
}
