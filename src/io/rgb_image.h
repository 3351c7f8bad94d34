// An 8-bit RGB image in memory, as Pillow holds an "RGB" image: rows top to
// bottom, each row's pixels left to right, each pixel R, G, B. What the image
// reader returns and Pillow-exact resampling works on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ditgen::io {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // (height, width, 3)

  static RgbImage blank(int64_t width, int64_t height) {
    return {width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  }
  uint8_t* row(int64_t y) { return pixels.data() + static_cast<size_t>(y * width * 3); }
  const uint8_t* row(int64_t y) const { return pixels.data() + static_cast<size_t>(y * width * 3); }
};

}  // namespace ditgen::io
