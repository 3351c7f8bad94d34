// The two format decoders behind io/image_reader.h (internal to io): each
// returns the pixels as stored (before any EXIF orientation) and the
// metadata the reader needs, as Pillow would list it in Image.info, and
// throws ConfigError("<name>: ...") on anything it refuses.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "io/image_reader.h"
#include "io/rgb_image.h"

namespace ditgen::io {

struct StoredImage {
  RgbImage rgb;
  std::optional<std::string> exif;  // info["exif"]: the EXIF block
  std::optional<std::string> xmp;   // the XMP packet Pillow's getexif() searches
  std::optional<std::array<int32_t, 3>> transparency;  // see DecodedImage
};

StoredImage decode_png(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits);
StoredImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits);

// ConfigError unless 1 <= width, height <= limits.max_side and
// width * height <= limits.max_pixels.
void check_image_size(int64_t width, int64_t height, const std::string& name, const ImageLimits& limits);

}  // namespace ditgen::io
