// WeightStore over single files and float8 checkpoints: ComfyUI's scaled
// fp8 convention against torch's float32 products (tests/fixtures/gguf/
// fp8_scaled*.safetensors), opened as a file and as a directory; the bad
// inputs (a float8 weight without its scale where the checkpoint says it is
// scaled, a scale of the wrong shape or without a weight, a GGUF of another
// architecture, a missing or misshapen tensor) each a ModelError naming the
// file and the tensor or key; GGUF files through the store, with the
// "model.diffusion_model." prefix stripped as ComfyUI-GGUF strips it.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace ditgen;
using namespace ditgen::io;
using testing::contains;
using testing::model_error_of;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/gguf/";

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_weight_files") {}
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// A safetensors file from a JSON header and raw data (the header padded to 8).
void write_safetensors_bytes(const std::string& path, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << bytes << header << data;
}

std::string f32_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

void check_scaled_fixture(const WeightStore& store) {
  auto ref = SafetensorsFile::open(kFixtures + "fp8_scaled_ref.safetensors");
  REQUIRE(store.scale_of("blocks.0.ffn.0.weight"));
  CHECK(*store.scale_of("blocks.0.ffn.0.weight") == "blocks.0.ffn.0.scale_weight");
  CHECK(store.scale_of("blocks.0.ffn.0.bias") == nullptr);
  for (const char* name : {"blocks.0.ffn.0.weight", "blocks.0.ffn.2.weight"}) {
    CAPTURE(std::string(name));
    CHECK(store.info(name).type != StoredType::kF32);  // float8 in the file
    const Tensor expected = ref->load(name);
    CHECK(same_bits(store.load(name), expected));
    CHECK(same_bits(store.load_f32(name), expected));
    const int64_t rows = expected.dim(0), cols = expected.dim(1);
    const Tensor band = store.load_rows(name, 2, 5);
    REQUIRE(band.shape() == Shape{3, cols});
    CHECK(std::memcmp(band.raw(), expected.data() + 2 * cols, 3 * cols * 4) == 0);
    const Tensor part = store.load_cols(name, 3, 7);
    REQUIRE(part.shape() == Shape{rows, 4});
    for (int64_t r = 0; r < rows; ++r) CHECK(std::memcmp(part.data() + 4 * r, expected.data() + r * cols + 3, 16) == 0);
    store.expect(name, expected.shape());  // float8 weights are floating
    CHECK(contains(model_error_of([&] { store.load_rows(name, 3, rows + 1); }), std::string("tensor '") + name + "'"));
  }
  CHECK(store.load("blocks.0.ffn.0.bias").dtype() == DType::kBF16);  // unscaled: as stored
  CHECK(store.points_into_file("blocks.0.ffn.0.bias", store.load("blocks.0.ffn.0.bias")));
  CHECK_FALSE(store.points_into_file("blocks.0.ffn.0.weight", store.load("blocks.0.ffn.0.weight")));  // decoded
  CHECK(same_bits(store.load_f32("blocks.0.ffn.0.bias"), ref->load("blocks.0.ffn.0.bias")));
  CHECK(same_bits(store.load_f32("blocks.0.norm.weight"), ref->load("blocks.0.norm.weight")));
}

}  // namespace

TEST_CASE("weight store: ComfyUI's scaled fp8, as a file and as a directory, is weight.to(float32) * scale") {
  check_scaled_fixture(WeightStore::open_file(kFixtures + "fp8_scaled.safetensors"));
  TempDir dir;
  std::filesystem::copy_file(kFixtures + "fp8_scaled.safetensors", dir.file("diffusion_pytorch_model.safetensors"));
  check_scaled_fixture(WeightStore::open_dir(dir.path.string()));
}

TEST_CASE("weight store: plain float8 decodes without scales") {
  const WeightStore store = WeightStore::open_file(kFixtures + "fp8_plain.safetensors");
  auto ref = SafetensorsFile::open(kFixtures + "fp8_plain_ref.safetensors");
  CHECK(store.scale_of("w") == nullptr);
  CHECK(same_bits(store.load("w"), ref->load("w")));
  store.expect("w", {8, 32});
  CHECK(contains(model_error_of([&] { store.expect("w", {8, 16}); }), "tensor 'w' has shape [8, 32], expected [8, 16]"));
}

TEST_CASE("weight store: a scaled checkpoint's missing or misfit scales are named") {
  TempDir dir;
  const std::string f8_2x2 = R"("dtype":"F8_E4M3","shape":[2,2],"data_offsets":)";
  struct Case {
    const char* what;
    const char* file;
    std::string header;
    std::string data;
    std::vector<std::string> names;  // what the message must name
  };
  const std::vector<Case> cases = {
      {"marker, scale missing", "model.safetensors",
       R"({"scaled_fp8":{"dtype":"F8_E4M3","shape":[0],"data_offsets":[0,0]},"a.weight":{)" + f8_2x2 + "[0,4]}}",
       std::string(4, '\x38'), {"'a.weight'", "'a.scale_weight'", "scaled_fp8"}},
      {"other scales present, this one missing", "model.safetensors",
       R"({"a.weight":{)" + f8_2x2 + R"([0,4]},"b.weight":{)" + f8_2x2 +
           R"([4,8]},"b.scale_weight":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})",
       std::string(8, '\x38') + f32_bytes({0.5f}), {"'a.weight'", "'a.scale_weight'"}},
      {"file name says scaled", "wan_t2v_fp8_scaled.safetensors", R"({"a.weight":{)" + f8_2x2 + "[0,4]}}",
       std::string(4, '\x38'), {"'a.weight'", "file name says scaled"}},
      {"scale of the wrong shape", "model.safetensors",
       R"({"a.weight":{)" + f8_2x2 + R"([0,4]},"a.scale_weight":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
       std::string(4, '\x38') + f32_bytes({1, 2, 3}), {"'a.scale_weight'", "[3]", "'a.weight' [2, 2]"}},
      {"scale of an integer type", "model.safetensors",
       R"({"a.weight":{)" + f8_2x2 + R"([0,4]},"a.scale_weight":{"dtype":"I32","shape":[],"data_offsets":[4,8]}})",
       std::string(8, '\x38'), {"'a.scale_weight'", "I32"}},
      {"scale without a weight", "model.safetensors",
       R"({"b.scale_weight":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", f32_bytes({1}),
       {"'b.scale_weight'", "'b.weight'", "missing"}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    CAPTURE(std::string(c.what));
    const std::string path = dir.file(std::to_string(k) + "_" + c.file);
    write_safetensors_bytes(path, c.header, c.data);
    const std::string msg = model_error_of([&] { WeightStore::open_file(path); });
    CHECK_MESSAGE(contains(msg, path), msg);
    for (const std::string& name : c.names) CHECK_MESSAGE(contains(msg, name), msg);
  }
  // Per-row scales are one value per row.
  const std::string rows = dir.file("rows.safetensors");
  write_safetensors_bytes(rows,
                          R"({"a.weight":{)" + f8_2x2 +
                              R"([0,4]},"a.scale_weight":{"dtype":"F32","shape":[2,1],"data_offsets":[4,12]}})",
                          std::string("\x38\x38\xb8\x38", 4) + f32_bytes({0.5f, 4.0f}));  // 0x38: 1.0, 0xb8: -1.0
  CHECK(WeightStore::open_file(rows).load("a.weight").to_vector() == std::vector<float>{0.5f, 0.5f, -4.0f, 4.0f});
}

// The options a GGUF of `architecture` is opened with (no other naming).
static SingleFileOptions gguf_options(const std::string& architecture, const std::string& prefix = {}) {
  SingleFileOptions o;
  o.architecture = architecture;
  o.prefix = prefix;
  return o;
}

TEST_CASE("weight store: a GGUF file, its architecture checked and ComfyUI's prefix stripped") {
  const std::string wan = kFixtures + "wan_layout.gguf";
  const WeightStore store = WeightStore::open_file(wan, gguf_options("wan"));
  CHECK(store.dir() == wan);
  CHECK(store.names().size() == 5);
  store.expect("conv.weight", {16, 4, 2, 2, 2});
  store.expect("blocks.0.self_attn.q.weight", {32, 64});
  CHECK(store.load("blocks.0.self_attn.q.weight").dtype() == DType::kF32);  // Q8_0, dequantized
  CHECK(store.load("head.head.weight").dtype() == DType::kF16);            // as stored
  CHECK(store.points_into_file("head.head.weight", store.load("head.head.weight")));
  CHECK(store.points_into_file("head.head.weight", store.load_rows("head.head.weight", 3, 5)));
  CHECK_FALSE(store.points_into_file("head.head.weight", store.load_f32("head.head.weight")));  // a widened copy
  CHECK_FALSE(store.points_into_file("blocks.0.self_attn.q.weight", store.load("blocks.0.self_attn.q.weight")));
  CHECK(store.load_f32("head.head.weight").dtype() == DType::kF32);

  const std::string other = model_error_of([&] { WeightStore::open_file(wan, gguf_options("flux")); });
  CHECK(contains(other, wan));
  CHECK(contains(other, "'general.architecture' is 'wan', expected 'flux'"));
  const std::string shape = model_error_of([&] { store.expect("blocks.0.self_attn.q.weight", {64, 32}); });
  CHECK(contains(shape, wan));
  CHECK(contains(shape, "tensor 'blocks.0.self_attn.q.weight' has shape [32, 64], expected [64, 32]"));
  const std::string missing = model_error_of([&] { store.expect("blocks.1.self_attn.q.weight", {32, 64}); });
  CHECK(contains(missing, wan));
  CHECK(contains(missing, "missing tensor 'blocks.1.self_attn.q.weight'"));

  TempDir dir;
  const std::string prefixed = dir.file("prefixed.gguf");
  GgufWriter w("wan");
  const std::vector<float> x(32, 0.25f);
  std::vector<uint8_t> f32(128);
  std::memcpy(f32.data(), x.data(), 128);
  w.add_tensor("model.diffusion_model.blocks.0.ffn.0.weight", GgmlType::kF32, {1, 32}, f32);
  w.add_tensor("first_stage_model.decoder.conv_in.weight", GgmlType::kF32, {32}, f32);
  w.write(prefixed);
  const WeightStore stripped = WeightStore::open_file(prefixed, gguf_options("wan", "model.diffusion_model."));
  CHECK(stripped.names() == std::vector<std::string>{"blocks.0.ffn.0.weight"});
  CHECK(stripped.load("blocks.0.ffn.0.weight").to_vector() == x);
  CHECK(WeightStore::open_file(prefixed).names().size() == 2);  // no prefix asked: every name as it is
  // Not a GGUF, not safetensors: the safetensors reader says why.
  const std::string junk = dir.file("junk.bin");
  std::ofstream(junk) << "GGU";
  CHECK(contains(model_error_of([&] { WeightStore::open_file(junk); }), junk));
}
