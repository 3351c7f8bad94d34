// read_png_rgb: a resumed run's contact sheet reads back the PNGs an
// earlier run wrote, which a user may have replaced, so it goes through the
// one bounded image decoder (io/image_reader.h: stb_image's PNG decoder
// compiled once, its header checked before any pixel is decoded and every
// allocation capped, so a zlib bomb fails instead of taking the machine's
// memory; fuzz/fuzz_png_read.cpp and fuzz_image_reader.cpp), with the
// run's own size as the limit.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "io/image_reader.h"
#include "io/png.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

// Far above any output ditgen writes (a 4096 x 4096 image).
constexpr int64_t kMaxPixels = int64_t{1} << 24;

}  // namespace

bool read_png_rgb(const std::string& path, int width, int height, std::vector<uint8_t>& pixels, int& out_width,
                  int& out_height) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8 || bytes[0] != 0x89 || bytes[1] != 'P') return false;  // a PNG, not any image
  ImageLimits limits;
  limits.max_pixels = kMaxPixels;
  try {
    DecodedImage image = decode_image(bytes.data(), bytes.size(), path, limits);
    if ((width > 0 && image.rgb.width != width) || (height > 0 && image.rgb.height != height)) return false;
    out_width = static_cast<int>(image.rgb.width);
    out_height = static_cast<int>(image.rgb.height);
    pixels = std::move(image.rgb.pixels);
    return true;
  } catch (const ConfigError&) {
    return false;  // not a readable PNG: the contact sheet leaves its cell out
  }
}

}  // namespace ditgen::io
