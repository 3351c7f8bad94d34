// PNG writing: stb_image_write encodes the pixels; text chunks are spliced in
// after IHDR (the first chunk, always 25 bytes after the 8-byte signature),
// which is where viewers and webui-style tools look for "parameters".
// stb is compiled here, once, with static linkage so no other translation
// unit can clash with its symbols.
#include "io/png.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "util/atomic_file.h"
#include "util/error.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

namespace ditgen::io {
namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr size_t kAfterIhdr = 8 + 4 + 4 + 13 + 4;  // signature, IHDR length, type, data, CRC

void append_u32_be(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// length, type, data, CRC(type + data)
void append_chunk(std::vector<uint8_t>& out, const char type[4], const std::string& data) {
  append_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  append_u32_be(out, png_crc32(out.data() + type_at, 4 + data.size()));
}

void check_keyword(const std::string& key) {
  bool ok = !key.empty() && key.size() <= 79 && key.front() != ' ' && key.back() != ' ';
  for (char c : key) ok = ok && c >= 32 && c <= 126;
  if (!ok) throw std::invalid_argument("PNG text key '" + key + "' must be 1..79 printable ASCII characters");
}

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// tEXt for ASCII (a subset of its Latin-1), iTXt (uncompressed UTF-8) otherwise.
void append_text_chunk(std::vector<uint8_t>& out, const std::string& key, std::string value) {
  check_keyword(key);
  for (char& c : value)
    if (c == '\0') c = ' ';
  if (is_ascii(value)) {
    append_chunk(out, "tEXt", key + '\0' + value);
  } else {
    // keyword NUL, compression flag 0, method 0, language "" NUL, translated keyword "" NUL, text
    append_chunk(out, "iTXt", key + std::string("\0\0\0\0\0", 5) + value);
  }
}

}  // namespace

uint32_t png_crc32(const uint8_t* bytes, size_t size, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels, const PngText& text) {
  if (width <= 0 || height <= 0 || channels < 1 || channels > 4 ||
      static_cast<int64_t>(width) * channels > std::numeric_limits<int>::max() / 2 ||
      static_cast<int64_t>(width) * height * channels > std::numeric_limits<int>::max() / 2)
    throw std::invalid_argument("encode_png: bad image size " + std::to_string(width) + "x" + std::to_string(height) +
                                "x" + std::to_string(channels));
  int encoded_size = 0;
  unsigned char* encoded = stbi_write_png_to_mem(pixels, width * channels, width, height, channels, &encoded_size);
  if (!encoded) throw RuntimeFailure("PNG encoding of a " + std::to_string(width) + "x" + std::to_string(height) +
                                     " image failed (out of memory?)");
  std::vector<uint8_t> png(encoded, encoded + encoded_size);
  STBIW_FREE(encoded);
  if (png.size() < kAfterIhdr || std::memcmp(png.data(), kPngSignature, 8) != 0 ||
      std::memcmp(png.data() + 12, "IHDR", 4) != 0)
    throw RuntimeFailure("PNG encoder produced an unexpected layout (no IHDR after the signature)");

  std::vector<uint8_t> chunks;
  for (const auto& [key, value] : text) append_text_chunk(chunks, key, value);
  png.insert(png.begin() + kAfterIhdr, chunks.begin(), chunks.end());
  return png;
}

void write_png(const std::string& path, const uint8_t* pixels, int width, int height, int channels,
               const PngText& text) {
  const std::vector<uint8_t> png = encode_png(pixels, width, height, channels, text);
  write_file_atomic(path, png.data(), png.size());
}

std::vector<uint8_t> float_image_to_rgb8(const float* chw, int channels, int height, int width) {
  const size_t plane = static_cast<size_t>(height) * width;
  std::vector<uint8_t> out(plane * channels);
  for (int c = 0; c < channels; ++c) {
    const float* src = chw + c * plane;
    for (size_t i = 0; i < plane; ++i) {
      float x = src[i];
      x = x >= 0.0f ? (x <= 1.0f ? x : 1.0f) : 0.0f;  // NaN fails the first test: 0
      // nearbyint under the default rounding mode rounds ties to even, as numpy's round().
      out[i * channels + c] = static_cast<uint8_t>(std::nearbyint(x * 255.0f));
    }
  }
  return out;
}

std::vector<uint8_t> float_image_to_rgb8(const Tensor& chw) {
  if (chw.ndim() != 3)
    throw std::invalid_argument("float_image_to_rgb8: expected a [C, H, W] image, got " + shape_str(chw.shape()));
  return float_image_to_rgb8(chw.data(), static_cast<int>(chw.dim(0)), static_cast<int>(chw.dim(1)),
                             static_cast<int>(chw.dim(2)));
}

}  // namespace ditgen::io
