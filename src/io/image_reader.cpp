// The input image reader: the file read whole (its bytes are both decoded
// and hashed), the format told by its first bytes, the decoder's pixels
// oriented as exif_transpose orients them.
#include "io/image_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "io/exif_orientation.h"
#include "io/image_decoders.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ditgen::io {
namespace {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  auto fail = [&](const std::string& why) { return ConfigError(path + ": " + why); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw fail("cannot read the image (" + errno_text(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw fail("is a directory, not an image file");
  if (!S_ISREG(st.st_mode)) throw fail("is not a regular file (a device, pipe or socket)");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) throw fail("cannot read the image (" + errno_text(errno) + ")");
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  for (;;) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file.get());
    if (n == 0) break;
    if (int64_t(bytes.size() + n) > kMaxImageFileBytes)
      throw fail("larger than " + std::to_string(kMaxImageFileBytes >> 20) + " MiB, beyond any image ditgen reads");
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  if (std::ferror(file.get())) throw fail("cannot read the image (read error)");
  return bytes;
}

}  // namespace

void check_image_size(int64_t width, int64_t height, const std::string& name, const ImageLimits& limits) {
  const std::string size = std::to_string(width) + " x " + std::to_string(height);
  if (width < 1 || height < 1) throw ConfigError(name + ": the image has zero width or height (" + size + ")");
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels)
    throw ConfigError(name + ": the image is " + size + ", beyond the limit of " + std::to_string(limits.max_side) +
                      " pixels a side and " + std::to_string(limits.max_pixels) + " pixels in all");
}

DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits) {
  if (size == 0) throw ConfigError(name + ": the file is empty");
  DecodedImage out;
  StoredImage stored;
  if (size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
    out.format = "png";
    stored = decode_png(data, size, name, limits);
  } else if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    out.format = "jpeg";
    stored = decode_jpeg(data, size, name, limits);
  } else {
    static const char digits[] = "0123456789abcdef";
    std::string first;
    for (size_t i = 0; i < 4 && i < size; ++i) {
      if (i) first.push_back(' ');
      first.push_back(digits[data[i] >> 4]);
      first.push_back(digits[data[i] & 15]);
    }
    throw ConfigError(name + ": not a PNG or JPEG file (it starts with bytes " + first + ")");
  }
  // exif_transpose: the EXIF tag when the block has one, else the XMP's.
  std::optional<int64_t> orientation;
  if (stored.exif)
    orientation = exif_orientation_tag(reinterpret_cast<const uint8_t*>(stored.exif->data()), stored.exif->size());
  if (!orientation && stored.xmp) orientation = xmp_orientation(*stored.xmp);
  out.orientation = orientation && *orientation >= 1 && *orientation <= 8 ? *orientation : 1;
  out.rgb = out.orientation == 1 ? std::move(stored.rgb) : apply_exif_orientation(stored.rgb, out.orientation);
  out.transparency = stored.transparency;
  return out;
}

InputImage read_input_image(const std::string& path, const ImageLimits& limits) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  InputImage in;
  in.path = path;
  in.image = decode_image(bytes.data(), bytes.size(), path, limits);
  in.sha256 = sha256_hex(bytes.data(), bytes.size());
  return in;
}

}  // namespace ditgen::io
