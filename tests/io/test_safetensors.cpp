// safetensors reader, writer and WeightStore. Files are assembled byte by
// byte here (a header string + raw data), independently of write_safetensors,
// so the reader is checked against bytes made another way. Every hostile
// header must give a ModelError naming the file (and the tensor, where one is
// at fault), never a crash or an overread.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "temp_dir.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "mapping.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;

namespace {
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_safetensors") {}
};
}  // namespace

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// header length (u64 LE) + header text + data
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

std::string f32_bytes(const std::vector<float>& values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string u16_bytes(const std::vector<uint16_t>& values) {
  std::string s;
  for (uint16_t v : values) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>(v >> 8);
  }
  return s;
}

using testing::contains;
using testing::model_error_of;

using testing::points_into_mapping_of;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

TEST_CASE("safetensors: F32, F16 and BF16 tensors load as stored and widen to exact float32") {
  TempDir dir;
  const std::string path = dir.file("mixed.safetensors");
  const std::vector<float> f32 = {1.5f, -2.25f, 0.0f, 3.0e38f, -1.0e-40f /* subnormal */, 7.0f};
  // f16: 1, -2, smallest subnormal 2^-24, largest subnormal 1023*2^-24, -0, +inf, -inf, 65504, 0.333251953125
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x8000, 0x7C00, 0xFC00, 0x7BFF, 0x3555};
  // bf16: 1, -3, 2^-133 (float subnormal), -0, +inf, 3.140625
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x0001, 0x8000, 0x7F80, 0x4049};
  std::string data = f32_bytes(f32);  // [0, 24)
  data += u16_bytes(f16);             // [24, 42)
  data += u16_bytes(bf16);            // [42, 54)
  data += u16_bytes({0x7E00, 0x7FC0});  // f16 NaN, bf16 NaN at [54, 56) and [56, 58)
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("h":{"dtype":"F16","shape":[9],"data_offsets":[24,42]},)"
      R"("b":{"dtype":"BF16","shape":[3,2],"data_offsets":[42,54]},)"
      R"("hn":{"dtype":"F16","shape":[],"data_offsets":[54,56]},)"
      R"("bn":{"dtype":"BF16","shape":[1],"data_offsets":[56,58]},)"
      R"("__metadata__":{"format":"pt","note":"hi"}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // data section 8-byte aligned
  write_bytes(path, safetensors_bytes(header, data));

  auto file = SafetensorsFile::open(path);
  CHECK(file->names() == std::vector<std::string>{"a", "b", "bn", "h", "hn"});
  CHECK(file->metadata().at("format") == "pt");
  CHECK(file->metadata().at("note") == "hi");
  CHECK(file->info("h").type == StoredType::kF16);
  CHECK(file->info("a").shape == Shape{2, 3});
  CHECK(file->info("b").begin == 42);
  CHECK(file->info("b").end == 54);

  Tensor a = file->load("a");
  CHECK(a.shape() == Shape{2, 3});
  for (size_t i = 0; i < f32.size(); ++i) CHECK(same_bits(a[i], f32[i]));

  Tensor h = file->load("h");
  REQUIRE(h.dtype() == DType::kF16);  // as stored, never widened on load
  for (size_t i = 0; i < f16.size(); ++i) CHECK(h.data_as<Float16>()[i].bits == f16[i]);
  h = h.to(DType::kF32);
  CHECK(h.shape() == Shape{9});
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == std::ldexp(1.0f, -24));
  CHECK(h[3] == std::ldexp(1023.0f, -24));
  CHECK(h[4] == 0.0f);
  CHECK(std::signbit(h[4]));
  CHECK(h[5] == std::numeric_limits<float>::infinity());
  CHECK(h[6] == -std::numeric_limits<float>::infinity());
  CHECK(h[7] == 65504.0f);
  CHECK(h[8] == 0.333251953125f);

  Tensor b = file->load("b");
  REQUIRE(b.dtype() == DType::kBF16);
  for (size_t i = 0; i < bf16.size(); ++i) CHECK(b.data_as<BFloat16>()[i].bits == bf16[i]);
  b = b.to(DType::kF32);
  CHECK(b.shape() == Shape{3, 2});
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -3.0f);
  CHECK(b[2] == std::ldexp(1.0f, -133));
  CHECK(b[2] > 0.0f);
  CHECK(b[3] == 0.0f);
  CHECK(std::signbit(b[3]));
  CHECK(b[4] == std::numeric_limits<float>::infinity());
  CHECK(b[5] == 3.140625f);

  Tensor hn = file->load("hn").to(DType::kF32);
  CHECK(hn.shape() == Shape{});
  CHECK(std::isnan(hn[0]));
  CHECK(std::isnan(file->load("bn").to(DType::kF32)[0]));
}

TEST_CASE("safetensors: aligned F32 is borrowed from the mapping, unaligned is copied") {
  TempDir dir;
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8};
  std::string header = R"({"w":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string aligned = dir.file("aligned.safetensors");
  write_bytes(aligned, safetensors_bytes(header, f32_bytes(values)));

  Tensor w, rows;
  {
    auto file = SafetensorsFile::open(aligned);
    w = file->load("w");
    CHECK(points_into_mapping_of(w.data(), aligned));
    CHECK(file->load("w").data() == w.data());  // the same bytes, not a copy
    rows = file->load_rows("w", 1, 3);
    CHECK(rows.data() == w.data() + 2);
  }
  // The file handle is gone; the tensors keep the mapping alive.
  CHECK(points_into_mapping_of(w.data(), aligned));
  CHECK(w.to_vector() == values);
  CHECK(rows.shape() == Shape{2, 2});
  CHECK(rows.to_vector() == std::vector<float>{3, 4, 5, 6});
  const float* was = w.data();
  w = Tensor();
  rows = Tensor();
  CHECK_FALSE(points_into_mapping_of(was, aligned));  // the last user unmapped it

  // One extra header byte puts the data at an odd offset: a copy, same values.
  std::string odd_header = R"({"w":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]}})";
  odd_header.append((8 - odd_header.size() % 8) % 8 + 1, ' ');
  const std::string unaligned = dir.file("unaligned.safetensors");
  write_bytes(unaligned, safetensors_bytes(odd_header, f32_bytes(values)));
  auto file = SafetensorsFile::open(unaligned);
  Tensor copy = file->load("w");
  CHECK_FALSE(points_into_mapping_of(copy.data(), unaligned));
  CHECK(reinterpret_cast<uintptr_t>(copy.data()) % alignof(float) == 0);
  CHECK(copy.to_vector() == values);
  CHECK(file->load_rows("w", 3, 4).to_vector() == std::vector<float>{7, 8});
}

TEST_CASE("safetensors: BF16, F16, I32 and I64 load as stored, borrowed when aligned, copied when not") {
  TempDir dir;
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x7F80, 0x0001}, f16 = {0x3C00, 0xC000, 0x7C00, 0x0001};
  const std::vector<int32_t> i32 = {-7, 2147483647};
  const std::vector<int64_t> i64 = {-1, int64_t{1} << 40};
  std::string data = u16_bytes(bf16) + u16_bytes(f16);  // [0, 8), [8, 16)
  data.append(reinterpret_cast<const char*>(i32.data()), 8);   // [16, 24)
  data.append(reinterpret_cast<const char*>(i64.data()), 16);  // [24, 40)
  const std::string entries =
      R"({"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("h":{"dtype":"F16","shape":[4],"data_offsets":[8,16]},)"
      R"("i":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
      R"("l":{"dtype":"I64","shape":[2,1],"data_offsets":[24,40]}})";
  for (int misalign : {0, 1}) {
    CAPTURE(misalign);
    std::string header = entries;
    header.append((8 - header.size() % 8) % 8 + misalign, ' ');
    const std::string path = dir.file("typed" + std::to_string(misalign) + ".safetensors");
    write_bytes(path, safetensors_bytes(header, data));
    auto file = SafetensorsFile::open(path);
    const Tensor b = file->load("b"), h = file->load("h"), i = file->load("i"), l = file->load("l");
    CHECK(b.dtype() == DType::kBF16);
    CHECK(h.dtype() == DType::kF16);
    CHECK(i.dtype() == DType::kI32);
    CHECK(l.dtype() == DType::kI64);
    CHECK(l.shape() == Shape{2, 1});
    for (const Tensor* t : {&b, &h, &i, &l}) {
      CHECK(points_into_mapping_of(t->raw(), path) == (misalign == 0));
      CHECK(reinterpret_cast<uintptr_t>(t->raw()) % t->element_size() == 0);  // a copy is aligned too
    }
    for (size_t k = 0; k < 4; ++k) {
      CHECK(b.data_as<BFloat16>()[k].bits == bf16[k]);
      CHECK(h.data_as<Float16>()[k].bits == f16[k]);
    }
    CHECK(i.data_as<int32_t>()[0] == -7);
    CHECK(i.data_as<int32_t>()[1] == 2147483647);
    CHECK(l.data_as<int64_t>()[1] == int64_t{1} << 40);
    const Tensor l1 = file->load_rows("l", 1, 2);
    CHECK(l1.data_as<int64_t>()[0] == int64_t{1} << 40);
    if (misalign == 0) CHECK(l1.raw() == l.raw_at(1));
    // Columns are copied in the stored dtype.
    const Tensor col = file->load_cols("b", 1, 2);
    CHECK(col.dtype() == DType::kBF16);
    CHECK(col.shape() == Shape{2, 1});
    CHECK_FALSE(points_into_mapping_of(col.raw(), path));
    CHECK(col.data_as<BFloat16>()[0].bits == bf16[1]);
    CHECK(col.data_as<BFloat16>()[1].bits == bf16[3]);
    // Reading a 16-bit tensor as float32 is an error, not a reinterpretation.
    CHECK_THROWS_AS(b.data(), std::logic_error);
    CHECK_THROWS_AS(b.data_as<Float16>(), std::logic_error);
  }
}

TEST_CASE("safetensors: load_rows reads only the requested rows") {
  TempDir dir;
  const std::string path = dir.file("rows.safetensors");
  // [4, 3] F16 with values 0..11 (exact in half)
  std::vector<uint16_t> halves;
  for (int i = 0; i < 12; ++i) {
    const float v = static_cast<float>(i);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    // Small integers are exact in half: re-bias the exponent, keep the top 10 mantissa bits.
    halves.push_back(i == 0 ? 0 : static_cast<uint16_t>((((bits >> 23) - 112) << 10) | ((bits >> 13) & 0x3ff)));
  }
  write_bytes(path, safetensors_bytes(R"({"t":{"dtype":"F16","shape":[4,3],"data_offsets":[0,24]}})",
                                      u16_bytes(halves)));
  auto file = SafetensorsFile::open(path);
  CHECK(file->load("t").to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor mid = file->load_rows("t", 1, 3);
  CHECK(mid.dtype() == DType::kF16);
  CHECK(mid.shape() == Shape{2, 3});
  CHECK(mid.to_vector() == std::vector<float>{3, 4, 5, 6, 7, 8});
  CHECK(file->load_rows("t", 2, 2).shape() == Shape{0, 3});

  const std::string bad_rows = model_error_of([&] { file->load_rows("t", 3, 5); });
  CHECK(contains(bad_rows, path));
  CHECK(contains(bad_rows, "'t'"));
  CHECK(contains(model_error_of([&] { file->load_rows("t", -1, 2); }), "'t'"));
}

TEST_CASE("safetensors: types without a tensor dtype open but do not load") {
  TempDir dir;
  const std::string path = dir.file("ints.safetensors");
  write_bytes(path, safetensors_bytes(
                        R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                        R"("u":{"dtype":"U32","shape":[1],"data_offsets":[16,20]},)"
                        R"("d":{"dtype":"F64","shape":[1],"data_offsets":[24,32]}})",
                        std::string(32, '\0')));
  auto file = SafetensorsFile::open(path);
  CHECK(file->info("ids").type == StoredType::kI64);
  CHECK(file->load("ids").dtype() == DType::kI64);
  for (const char* name : {"u", "d"}) {
    const std::string msg = model_error_of([&] { file->load(name); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, std::string("tensor '") + name + "' has dtype " + (name[0] == 'u' ? "U32" : "F64") +
                            ", expected F32, BF16, F16, I32, I64, F8_E4M3 or F8_E5M2"));
  }
  DType d;
  CHECK_FALSE(tensor_dtype(StoredType::kU8, d));
  REQUIRE(tensor_dtype(StoredType::kI32, d));
  CHECK(d == DType::kI32);
  CHECK(std::string(stored_type_name(StoredType::kBF16)) == "BF16");
  CHECK(stored_type_size(StoredType::kF8E4M3) == 1);
  CHECK(contains(model_error_of([&] { file->load("nope"); }), "missing tensor 'nope'"));
}

TEST_CASE("safetensors: hostile files fail with ModelError naming file and tensor") {
  TempDir dir;
  struct Case {
    const char* what;
    std::string bytes;
    const char* tensor;    // must appear in the message when not null
    const char* contains;  // a distinctive part of the message
  };
  const std::string f32x2 = f32_bytes({1, 2});
  auto file_with = [&](const std::string& header, const std::string& data = std::string(8, '\0')) {
    return safetensors_bytes(header, data);
  };
  const std::vector<Case> cases = {
      {"shorter than 8 bytes", std::string(5, '\0'), nullptr, "too short"},
      {"empty file", std::string(), nullptr, "too short"},
      {"header length beyond the file", u64_le(100) + "{}", nullptr, "exceeds the file size"},
      {"absurd header length", u64_le(1ull << 60) + "{}", nullptr, "limit"},
      {"header length all ones", u64_le(~0ull) + "{}", nullptr, "limit"},
      {"invalid JSON", file_with(R"({"w":{"dtype":)"), nullptr, "not valid JSON"},
      {"invalid UTF-8", file_with("{\"w\xff\xfe\":{}}"), nullptr, "not valid JSON"},
      {"empty header", file_with(""), nullptr, "not valid JSON"},
      {"not an object", file_with("[1,2,3]"), nullptr, "must be a JSON object"},
      {"entry not an object", file_with(R"({"w":5})"), "w", "must be an object"},
      {"missing dtype", file_with(R"({"w":{"shape":[2],"data_offsets":[0,8]}})"), "w", "missing \"dtype\""},
      {"dtype not a string", file_with(R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})"), "w",
       "\"dtype\" must be a string"},
      {"unknown dtype", file_with(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})"), "w",
       "unknown dtype 'F33'"},
      {"missing shape", file_with(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})"), "w", "missing \"shape\""},
      {"shape not an array", file_with(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})"), "w",
       "\"shape\" must be an array"},
      {"negative dim", file_with(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"), "w",
       "non-negative integers"},
      {"fractional dim", file_with(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})"), "w",
       "non-negative integers"},
      {"string dim", file_with(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})"), "w",
       "non-negative integers"},
      {"dim beyond int64", file_with(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})"),
       "w", "non-negative integers"},
      {"element count overflow",
       file_with(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})"), "w",
       "overflows 64 bits"},
      {"byte size overflow", file_with(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})"),
       "w", "overflows 64 bits"},
      {"missing data_offsets", file_with(R"({"w":{"dtype":"F32","shape":[2]}})"), "w", "missing \"data_offsets\""},
      {"data_offsets not an array", file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":8}})"), "w",
       "two non-negative integers"},
      {"three data_offsets", file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})"), "w",
       "two non-negative integers"},
      {"negative data_offset", file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})"), "w",
       "two non-negative integers"},
      {"float data_offset", file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})"), "w",
       "two non-negative integers"},
      {"begin after end", file_with(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})"), "w",
       "begin after end"},
      {"end beyond data", file_with(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})"), "w",
       "end beyond the data section"},
      {"huge end", file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551607,18446744073709551615]}})"),
       "w", "end beyond the data section"},
      {"size mismatch", file_with(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"), "w",
       "needs 12"},
      {"size mismatch f16", file_with(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})"), "w",
       "needs 4"},
      {"metadata not an object", file_with(R"({"__metadata__":[1]})"), nullptr, "\"__metadata__\" must be an object"},
      {"metadata value not a string", file_with(R"({"__metadata__":{"k":1}})"), "k", "must be a string"},
      {"overlapping tensors",
       file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0')),
       "b", "overlap"},
      {"deeply nested, unterminated", file_with(std::string(200000, '[')), nullptr, "not valid JSON"},
      {"deeply nested metadata", file_with("{\"__metadata__\":" + std::string(100000, '[') + std::string(100000, ']') + "}"),
       nullptr, "\"__metadata__\" must be an object"},
  };
  int index = 0;
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string path = dir.file("hostile_" + std::to_string(index++) + ".safetensors");
    write_bytes(path, c.bytes);
    const std::string msg = model_error_of([&] { SafetensorsFile::open(path); });
    CAPTURE(msg);
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(contains(msg, c.contains));
    if (c.tensor) CHECK(contains(msg, std::string("'") + c.tensor + "'"));
  }

  // Zero-size tensors may share offsets without overlapping anything.
  const std::string empties = dir.file("empties.safetensors");
  write_bytes(empties, file_with(R"({"a":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("c":{"dtype":"F16","shape":[0],"data_offsets":[4,4]}})"));
  auto file = SafetensorsFile::open(empties);
  CHECK(file->load("a").shape() == Shape{0, 4});

  CHECK(contains(model_error_of([&] { SafetensorsFile::open(dir.file("absent.safetensors")); }),
                 dir.file("absent.safetensors") + ": cannot open"));
  CHECK(contains(model_error_of([&] { SafetensorsFile::open(dir.path.string()); }), "not a regular file"));
}

TEST_CASE("safetensors: write_safetensors round-trips with an aligned header") {
  TempDir dir;
  const std::string path = dir.file("sub/dir/out.safetensors");  // parent directories are created
  Tensor noise = Tensor::from_vector({2, 1, 3}, {0.5f, -1.0f, 2.0f, 1e-30f, -0.0f, 3.0f});
  Tensor scalar = Tensor::from_vector({}, {42.0f});
  Tensor empty = Tensor::zeros({0, 5});
  write_safetensors(path, {{"noise", noise}, {"s", scalar}, {"e", empty}}, {{"seed", "7"}});

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  CHECK((8 + header_len) % 8 == 0);
  CHECK(bytes.size() == 8 + header_len + 7 * 4);

  auto file = SafetensorsFile::open(path);
  CHECK(file->names() == std::vector<std::string>{"e", "noise", "s"});
  CHECK(file->metadata().at("seed") == "7");
  Tensor back = file->load("noise");
  CHECK(back.shape() == Shape{2, 1, 3});
  for (int i = 0; i < 6; ++i) CHECK(same_bits(back[i], noise[i]));
  CHECK(points_into_mapping_of(back.data(), path));
  CHECK(file->load("s").shape() == Shape{});
  CHECK(file->load("s")[0] == 42.0f);
  CHECK(file->load("e").shape() == Shape{0, 5});
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    CHECK(entry.path().filename() == "out.safetensors");  // no temporary left

  CHECK_THROWS_AS(write_safetensors(dir.file("dup.safetensors"), {{"a", noise}, {"a", noise}}), RuntimeFailure);
  CHECK_FALSE(fs::exists(dir.file("dup.safetensors")));
}

TEST_CASE("safetensors: write_safetensors writes each tensor in its own dtype") {
  TempDir dir;
  const std::string path = dir.file("typed.safetensors");
  Tensor b = Tensor::empty({3}, Device::kCPU, DType::kBF16), l = Tensor::empty({2}, Device::kCPU, DType::kI64);
  for (int i = 0; i < 3; ++i) b.data_as<BFloat16>()[i].bits = static_cast<uint16_t>(0x3F80 + i);
  l.data_as<int64_t>()[0] = -5;
  l.data_as<int64_t>()[1] = int64_t{1} << 50;
  write_safetensors(path, {{"l", l}, {"b", b}});
  auto file = SafetensorsFile::open(path);
  CHECK(file->info("b").type == StoredType::kBF16);
  CHECK(file->info("l").type == StoredType::kI64);
  CHECK(file->info("b").end - file->info("b").begin == 6);
  const Tensor b2 = file->load("b"), l2 = file->load("l");
  for (int i = 0; i < 3; ++i) CHECK(b2.data_as<BFloat16>()[i].bits == 0x3F80 + i);
  CHECK(l2.data_as<int64_t>()[1] == int64_t{1} << 50);
  CHECK(points_into_mapping_of(l2.raw(), path));  // first in the file: 8-byte aligned
}

// ---------------------------------------------------------------- WeightStore

namespace {

// A valid F32 file with the given tensors (name -> shape), values 0, 1, 2, ...
void write_valid(const std::string& path, const std::vector<std::pair<std::string, Shape>>& tensors) {
  std::ostringstream header;
  std::string data;
  header << '{';
  for (const auto& [name, shape] : tensors) {
    int64_t n = 1;
    std::ostringstream dims;
    for (size_t i = 0; i < shape.size(); ++i) {
      n *= shape[i];
      dims << (i ? "," : "") << shape[i];
    }
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
    header << (header.tellp() > 1 ? "," : "") << '"' << name << R"(":{"dtype":"F32","shape":[)"
           << dims.str() << R"(],"data_offsets":[)" << data.size() << ',' << data.size() + 4 * n << "]}";
    data += f32_bytes(values);
  }
  header << '}';
  write_bytes(path, safetensors_bytes(header.str(), data));
}

}  // namespace

TEST_CASE("WeightStore: a single file, preferred names, and no weights") {
  TempDir dir;
  write_valid(dir.file("diffusion_pytorch_model.safetensors"), {{"pos_embed", {1, 4}}, {"proj.weight", {3, 2}}});
  write_valid(dir.file("diffusion_pytorch_model.fp16.safetensors"), {{"other", {1}}});
  WeightStore store = WeightStore::open_dir(dir.path.string());
  CHECK(store.dir() == dir.path.string());
  CHECK(store.names() == std::vector<std::string>{"pos_embed", "proj.weight"});
  CHECK(store.contains("proj.weight"));
  CHECK_FALSE(store.contains("other"));
  CHECK(store.file_of("pos_embed") == dir.file("diffusion_pytorch_model.safetensors"));
  CHECK(store.info("proj.weight").shape == Shape{3, 2});
  CHECK(store.load("proj.weight").to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(store.load_rows("proj.weight", 2, 3).to_vector() == std::vector<float>{4, 5});
  CHECK_NOTHROW(store.expect("proj.weight", {3, 2}));

  TempDir transformers;
  write_valid(transformers.file("model.safetensors"), {{"x", {2}}});
  write_valid(transformers.file("extra.safetensors"), {{"y", {2}}});
  CHECK(WeightStore::open_dir(transformers.path.string()).names() == std::vector<std::string>{"x"});

  TempDir lone;
  write_valid(lone.file("weights.safetensors"), {{"z", {2}}});
  CHECK(WeightStore::open_dir(lone.path.string()).names() == std::vector<std::string>{"z"});

  TempDir ambiguous;
  write_valid(ambiguous.file("a.safetensors"), {{"x", {2}}});
  write_valid(ambiguous.file("b.safetensors"), {{"x", {2}}});
  const std::string several = model_error_of([&] { WeightStore::open_dir(ambiguous.path.string()); });
  CHECK(contains(several, ambiguous.path.string()));
  CHECK(contains(several, "a.safetensors, b.safetensors"));

  TempDir bin_only;
  write_bytes(bin_only.file("diffusion_pytorch_model.bin"), "not really");
  CHECK(model_error_of([&] { WeightStore::open_dir(bin_only.path.string()); }) ==
        bin_only.path.string() +
            ": no *.safetensors weights, only a .bin/.pt checkpoint (convert it to safetensors: docs/real-models.md)");
  // A folder with only its config (a download that stopped): the weights are missing, said so.
  TempDir config_only;
  write_bytes(config_only.file("config.json"), "{}");
  CHECK(contains(model_error_of([&] { WeightStore::open_dir(config_only.path.string()); }),
                 config_only.path.string() + ": the weights are missing"));
  CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.file("nope")); }), "not a directory"));
}

TEST_CASE("WeightStore: expect() names file, tensor, and found vs expected") {
  TempDir dir;
  const std::string file = dir.file("diffusion_pytorch_model.safetensors");
  write_valid(file, {{"transformer_blocks.0.attn1.to_q.weight", {96, 64}}});
  WeightStore store = WeightStore::open_dir(dir.path.string());
  CHECK(model_error_of([&] { store.expect("transformer_blocks.0.attn1.to_q.weight", {96, 96}); }) ==
        file + ": tensor 'transformer_blocks.0.attn1.to_q.weight' has shape [96, 64], expected [96, 96] (from config.json)");
  CHECK(model_error_of([&] { store.expect("x", {1}); }) == file + ": missing tensor 'x'");
  CHECK(model_error_of([&] { store.load("x"); }) == file + ": missing tensor 'x'");

  TempDir ints;
  const std::string ints_file = ints.file("model.safetensors");
  write_bytes(ints_file, safetensors_bytes(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                                           std::string(16, '\0')));
  WeightStore int_store = WeightStore::open_dir(ints.path.string());
  CHECK(model_error_of([&] { int_store.expect("ids", {2}); }) ==
        ints_file + ": tensor 'ids' has dtype I64, expected F32, BF16 or F16 (or float8, or a GGUF block type)");
}

TEST_CASE("WeightStore: sharded weights with an index") {
  TempDir dir;
  write_valid(dir.file("diffusion_pytorch_model-00001-of-00002.safetensors"), {{"a", {2}}, {"b", {1, 3}}});
  write_valid(dir.file("diffusion_pytorch_model-00002-of-00002.safetensors"), {{"c", {4}}, {"unlisted", {1}}});
  const std::string index = dir.file("diffusion_pytorch_model.safetensors.index.json");
  write_bytes(index, R"({"metadata":{"total_size":36},"weight_map":{
      "a":"diffusion_pytorch_model-00001-of-00002.safetensors",
      "b":"diffusion_pytorch_model-00001-of-00002.safetensors",
      "c":"diffusion_pytorch_model-00002-of-00002.safetensors"}})");
  WeightStore store = WeightStore::open_dir(dir.path.string());
  CHECK(store.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(store.file_of("c") == dir.file("diffusion_pytorch_model-00002-of-00002.safetensors"));
  CHECK(store.load("c").to_vector() == std::vector<float>{0, 1, 2, 3});
  CHECK(store.load("b").shape() == Shape{1, 3});
  CHECK(model_error_of([&] { store.expect("zz", {1}); }) == index + ": missing tensor 'zz'");
  CHECK(contains(model_error_of([&] { store.expect("c", {5}); }),
                 dir.file("diffusion_pytorch_model-00002-of-00002.safetensors") + ": tensor 'c' has shape [4]"));

  SUBCASE("a missing shard") {
    write_bytes(index, R"({"weight_map":{"a":"diffusion_pytorch_model-00001-of-00002.safetensors",
                                          "q":"diffusion_pytorch_model-00003-of-00002.safetensors"}})");
    const std::string msg = model_error_of([&] { WeightStore::open_dir(dir.path.string()); });
    CHECK(msg.rfind(index + ": ", 0) == 0);
    CHECK(contains(msg, "shard 'diffusion_pytorch_model-00003-of-00002.safetensors'"));
    CHECK(contains(msg, "'q'"));
  }
  SUBCASE("a tensor that is not in its shard") {
    write_bytes(index, R"({"weight_map":{"a":"diffusion_pytorch_model-00002-of-00002.safetensors"}})");
    const std::string msg = model_error_of([&] { WeightStore::open_dir(dir.path.string()); });
    CHECK(msg == index + ": tensor 'a' is mapped to shard 'diffusion_pytorch_model-00002-of-00002.safetensors', "
                         "which does not contain it");
  }
  SUBCASE("a shard path outside the directory") {
    write_bytes(index, R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
    CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.path.string()); }), "not a file name"));
  }
  SUBCASE("a malformed index") {
    write_bytes(index, R"({"weight_map":{"a":3}})");
    CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.path.string()); }), index + ": weight_map.a"));
    write_bytes(index, R"({"weight_map":[]})");
    CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.path.string()); }), index + ": weight_map"));
    write_bytes(index, R"({"weight_map":)");
    CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.path.string()); }), index + ": invalid JSON"));
  }
  SUBCASE("a corrupt shard names the shard") {
    write_bytes(dir.file("diffusion_pytorch_model-00002-of-00002.safetensors"), "tiny");
    CHECK(contains(model_error_of([&] { WeightStore::open_dir(dir.path.string()); }),
                   dir.file("diffusion_pytorch_model-00002-of-00002.safetensors") + ": file is 4 bytes"));
  }
}
