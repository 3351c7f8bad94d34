// The image test fixtures: manifest loading, reference PNG decoding (stb, in
// this file only) and a pixel comparison that says where images differ.
#include "image_fixtures.h"

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "stb_image_read.h"

namespace ditgen::testing {

std::string image_fixture(const std::string& relative) {
  return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/images/" + relative;
}

const nlohmann::json& image_manifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(image_fixture("manifest.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return manifest;
}

io::RgbImage load_reference_png(const std::string& path) {
  int w = 0, h = 0, n = 0;
  stbi_uc* p = stbi_load(path.c_str(), &w, &h, &n, 3);
  REQUIRE_MESSAGE(p != nullptr, path);
  io::RgbImage image = io::RgbImage::blank(w, h);
  std::memcpy(image.pixels.data(), p, image.pixels.size());
  stbi_image_free(p);
  return image;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string first_difference(const io::RgbImage& got, const io::RgbImage& want) {
  if (got.width != want.width || got.height != want.height)
    return "size " + std::to_string(got.width) + "x" + std::to_string(got.height) + ", want " +
           std::to_string(want.width) + "x" + std::to_string(want.height);
  for (size_t i = 0; i < want.pixels.size(); ++i)
    if (got.pixels[i] != want.pixels[i]) {
      const size_t pixel = i / 3;
      return "pixel (x " + std::to_string(pixel % size_t(want.width)) + ", y " +
             std::to_string(pixel / size_t(want.width)) + ") channel " + std::to_string(i % 3) + ": " +
             std::to_string(got.pixels[i]) + ", want " + std::to_string(want.pixels[i]);
    }
  return "";
}

}  // namespace ditgen::testing
