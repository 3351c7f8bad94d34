// EXIF orientation: a minimal TIFF directory walk (IFD0 only, the tag's first
// value whatever its integer type), the XMP fallback as Pillow's regular
// expression `tiff:Orientation(="|>)([0-9])`, and the eight transposes as
// one index map per orientation.
#include "io/exif_orientation.h"

#include <cstring>

namespace ditgen::io {
namespace {

constexpr uint16_t kOrientationTag = 274;

// Reads of a TIFF block in its byte order; every offset is checked first.
struct TiffBlock {
  const uint8_t* data;
  size_t size;
  bool big_endian;

  bool has(size_t offset, size_t n) const { return offset <= size && n <= size - offset; }
  uint32_t u16(size_t at) const {
    return big_endian ? (uint32_t(data[at]) << 8) | data[at + 1] : (uint32_t(data[at + 1]) << 8) | data[at];
  }
  uint32_t u32(size_t at) const {
    return big_endian ? (u16(at) << 16) | u16(at + 2) : (u16(at + 2) << 16) | u16(at);
  }
};

// The first value of an integer-typed entry (BYTE, SHORT, LONG and their
// signed forms), read where it lies: in the entry's 4 value bytes when it
// fits there, at the entry's offset otherwise.
std::optional<int64_t> first_integer(const TiffBlock& tiff, size_t entry) {
  const uint32_t type = tiff.u16(entry + 2);
  const uint32_t count = tiff.u32(entry + 4);
  size_t unit = 0;
  switch (type) {
    case 1: case 6: unit = 1; break;   // BYTE, SBYTE
    case 3: case 8: unit = 2; break;   // SHORT, SSHORT
    case 4: case 9: unit = 4; break;   // LONG, SLONG
    default: return std::nullopt;
  }
  if (count == 0) return std::nullopt;
  size_t at = entry + 8;
  if (uint64_t(count) * unit > 4) {
    at = tiff.u32(entry + 8);
    if (!tiff.has(at, size_t(count) * unit)) return std::nullopt;  // Pillow: skipped, "not enough data"
  }
  switch (type) {
    case 1: return tiff.data[at];
    case 6: return static_cast<int8_t>(tiff.data[at]);
    case 3: return tiff.u16(at);
    case 8: return static_cast<int16_t>(tiff.u16(at));
    case 4: return tiff.u32(at);
    default: return static_cast<int32_t>(tiff.u32(at));
  }
}

}  // namespace

std::optional<int64_t> exif_orientation_tag(const uint8_t* data, size_t size) {
  for (int i = 0; i < 2 && size >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0; ++i) {
    data += 6;
    size -= 6;
  }
  if (size < 8) return std::nullopt;
  TiffBlock tiff{data, size, false};
  if (std::memcmp(data, "MM\0*", 4) == 0) {
    tiff.big_endian = true;
  } else if (std::memcmp(data, "II*\0", 4) != 0) {
    return std::nullopt;
  }
  const size_t ifd0 = tiff.u32(4);
  if (!tiff.has(ifd0, 2)) return std::nullopt;
  const size_t entries = tiff.u16(ifd0);
  std::optional<int64_t> orientation;
  // A directory cut short keeps the entries read before the cut (as Pillow's).
  for (size_t i = 0; i < entries && tiff.has(ifd0 + 2 + 12 * i, 12); ++i) {
    const size_t entry = ifd0 + 2 + 12 * i;
    if (tiff.u16(entry) != kOrientationTag) continue;
    if (auto value = first_integer(tiff, entry)) orientation = value;  // a later entry wins
  }
  return orientation;
}

std::optional<int64_t> xmp_orientation(std::string_view xmp) {
  static constexpr std::string_view kKey = "tiff:Orientation";
  for (size_t at = xmp.find(kKey); at != std::string_view::npos; at = xmp.find(kKey, at + 1)) {
    std::string_view rest = xmp.substr(at + kKey.size());
    if (rest.substr(0, 2) == "=\"") {
      rest.remove_prefix(2);
    } else if (rest.substr(0, 1) == ">") {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    if (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') return rest[0] - '0';
  }
  return std::nullopt;
}

RgbImage apply_exif_orientation(const RgbImage& image, int64_t orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int64_t w = image.width, h = image.height;
  const bool swaps = orientation >= 5;  // 5-8 exchange width and height
  RgbImage out = RgbImage::blank(swaps ? h : w, swaps ? w : h);
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sx = 0, sy = 0;  // the source pixel shown at (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; sy = y; break;          // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;  // ROTATE_180
        case 4: sx = x; sy = h - 1 - y; break;          // FLIP_TOP_BOTTOM
        case 5: sx = y; sy = x; break;                  // TRANSPOSE
        case 6: sx = y; sy = h - 1 - x; break;          // ROTATE_270 (clockwise)
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;  // TRANSVERSE
        default: sx = w - 1 - y; sy = x; break;         // 8: ROTATE_90 (anticlockwise)
      }
      std::memcpy(out.row(y) + 3 * x, image.row(sy) + 3 * sx, 3);
    }
  }
  return out;
}

}  // namespace ditgen::io
