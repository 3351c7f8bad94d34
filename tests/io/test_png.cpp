// PNG writing: pixels read back with stb_image, text chunks found right after
// IHDR with valid CRCs (checked by a bitwise CRC written here), and the
// float -> 8-bit conversion matching numpy's (x * 255).round().
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "io/png.h"
#include "util/error.h"

#include "stb_image_read.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;

namespace {
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_png") {}
};
}  // namespace

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint32_t bitwise_crc32(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

struct Chunk {
  std::string type;
  std::string data;
  bool crc_ok;
};

std::vector<Chunk> chunks_of(const std::vector<uint8_t>& png) {
  std::vector<Chunk> out;
  REQUIRE(png.size() >= 8);
  const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  REQUIRE(std::memcmp(png.data(), signature, 8) == 0);
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t len = be32(&png[at]);
    REQUIRE(at + 12 + len <= png.size());
    Chunk c;
    c.type.assign(reinterpret_cast<const char*>(&png[at + 4]), 4);
    c.data.assign(reinterpret_cast<const char*>(&png[at + 8]), len);
    c.crc_ok = be32(&png[at + 8 + len]) == bitwise_crc32(&png[at + 4], 4 + len);
    out.push_back(c);
    at += 12 + len;
  }
  CHECK(at == png.size());
  return out;
}

}  // namespace

TEST_CASE("png: pixels round-trip and text chunks follow IHDR") {
  TempDir dir;
  const int w = 5, h = 3;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37 + 11);
  const std::string parameters =
      "red circle\nSteps: 50, Sampler: ddim, CFG scale: 4, Seed: 0, Size: 256x256, Model: DiT-XL-2-256";
  const std::string path = dir.file("out/image.png");
  write_png(path, rgb.data(), w, h, 3, {{"parameters", parameters}, {"Comment", "caf\xc3\xa9 \xe2\x98\x95"}});

  const std::vector<uint8_t> png = read_all(path);
  int rw = 0, rh = 0, rc = 0;
  unsigned char* pixels = stbi_load_from_memory(png.data(), static_cast<int>(png.size()), &rw, &rh, &rc, 0);
  REQUIRE(pixels);
  CHECK(rw == w);
  CHECK(rh == h);
  CHECK(rc == 3);
  CHECK(std::vector<uint8_t>(pixels, pixels + rgb.size()) == rgb);
  stbi_image_free(pixels);

  const std::vector<Chunk> chunks = chunks_of(png);
  REQUIRE(chunks.size() >= 5);
  for (const Chunk& c : chunks) CHECK_MESSAGE(c.crc_ok, c.type);
  CHECK(chunks[0].type == "IHDR");
  CHECK(chunks[1].type == "tEXt");
  CHECK(chunks[1].data == std::string("parameters") + '\0' + parameters);
  CHECK(chunks[2].type == "iTXt");
  CHECK(chunks[2].data == std::string("Comment") + std::string(5, '\0') + "caf\xc3\xa9 \xe2\x98\x95");
  CHECK(chunks.back().type == "IEND");

  for (const auto& entry : fs::directory_iterator(dir.path / "out")) CHECK(entry.path().filename() == "image.png");
}

TEST_CASE("png: gray and RGBA images, no text, and bad arguments") {
  const std::vector<uint8_t> gray = {0, 50, 100, 150, 200, 250};
  std::vector<uint8_t> png = encode_png(gray.data(), 3, 2, 1);
  int w, h, c;
  unsigned char* back = stbi_load_from_memory(png.data(), static_cast<int>(png.size()), &w, &h, &c, 0);
  REQUIRE(back);
  CHECK(c == 1);
  CHECK(std::vector<uint8_t>(back, back + 6) == gray);
  stbi_image_free(back);
  CHECK(chunks_of(png)[1].type == "IDAT");

  const std::vector<uint8_t> rgba = {1, 2, 3, 4, 5, 6, 7, 8};
  png = encode_png(rgba.data(), 1, 2, 4, {{"k", "v\0w"}});
  back = stbi_load_from_memory(png.data(), static_cast<int>(png.size()), &w, &h, &c, 0);
  REQUIRE(back);
  CHECK(c == 4);
  CHECK(std::vector<uint8_t>(back, back + 8) == rgba);
  stbi_image_free(back);
  CHECK(chunks_of(png)[1].data == std::string("k\0v", 3));  // "v\0w" as a C string literal is "v"

  png = encode_png(rgba.data(), 1, 2, 4, {{"k", std::string("v\0w", 3)}});
  CHECK(chunks_of(png)[1].data == std::string("k\0v w", 5));  // NUL in a value becomes a space

  CHECK_THROWS_AS(encode_png(gray.data(), 0, 2, 1), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(gray.data(), 3, 2, 5), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(gray.data(), 3, 2, 1, {{"", "v"}}), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(gray.data(), 3, 2, 1, {{std::string(80, 'k'), "v"}}), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(gray.data(), 3, 2, 1, {{"bad\nkey", "v"}}), std::invalid_argument);
}

TEST_CASE("png: a failed write leaves nothing behind") {
  TempDir dir;
  std::ofstream(dir.file("not_a_dir")) << "x";
  const std::vector<uint8_t> rgb(12, 7);
  const std::string path = dir.file("not_a_dir/image.png");
  try {
    write_png(path, rgb.data(), 2, 2, 3);
    FAIL("expected a RuntimeFailure");
  } catch (const RuntimeFailure& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    CHECK(entry.path().filename() == "not_a_dir");
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("png: crc32 matches the reference value") {
  const std::string check = "123456789";
  CHECK(png_crc32(reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xCBF43926u);
  // running form: crc(a + b) == crc(b, crc(a))
  const auto* p = reinterpret_cast<const uint8_t*>(check.data());
  CHECK(png_crc32(p + 4, 5, png_crc32(p, 4)) == 0xCBF43926u);
}

TEST_CASE("png: float_image_to_rgb8 clamps, rounds half to even, interleaves") {
  // A float x whose float32 product x * 255 is exactly 126.5: numpy rounds it to 126 (even).
  float tie = 126.5f / 255.0f;
  bool found = false;
  for (int step = -8; step <= 8 && !found; ++step) {
    float x = 126.5f / 255.0f;
    for (int k = 0; k < std::abs(step); ++k) x = std::nextafter(x, step < 0 ? 0.0f : 1.0f);
    if (x * 255.0f == 126.5f) {
      tie = x;
      found = true;
    }
  }
  REQUIRE(found);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [3, 1, 4] planar: R, G, B planes
  const std::vector<float> chw = {0.0f,  1.0f,   0.5f, tie,     // R
                                  -0.3f, 1.7f,   nan,  2.5f / 255.0f,  // G
                                  0.25f, 0.75f,  1e-3f, 0.999f};        // B
  const std::vector<uint8_t> rgb = float_image_to_rgb8(chw.data(), 3, 1, 4);
  // 0.25*255 = 63.75 -> 64; 0.75*255 = 191.25 -> 191; 1e-3*255 = 0.255 -> 0; 0.999*255 = 254.745 -> 255
  const uint8_t g3 = static_cast<uint8_t>(std::nearbyint((2.5f / 255.0f) * 255.0f));
  CHECK(rgb == std::vector<uint8_t>{0, 0, 64, 255, 255, 191, 128, 0, 0, 126, g3, 255});

  Tensor image = Tensor::from_vector({3, 1, 4}, chw);
  CHECK(float_image_to_rgb8(image) == rgb);
  CHECK_THROWS_AS(float_image_to_rgb8(Tensor::zeros({3, 4})), std::invalid_argument);
}
