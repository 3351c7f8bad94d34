// Shared by the image tests: tests/fixtures/images/ (made by
// scripts/fixtures/make_image_fixtures.py with Pillow, diffusers and
// transformers), its manifest, and PNG references decoded with the tests' own
// stb_image, independently of io/image_reader.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "io/rgb_image.h"

namespace ditgen::testing {

std::string image_fixture(const std::string& relative);  // tests/fixtures/images/<relative>
const nlohmann::json& image_manifest();
// An 8-bit RGB PNG written by Pillow, decoded by stb_image (REQUIRE on failure).
io::RgbImage load_reference_png(const std::string& path);
std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// The first position where two images differ, "" when equal (sizes included).
std::string first_difference(const io::RgbImage& got, const io::RgbImage& want);

}  // namespace ditgen::testing
