// PNG input: the chunk stream is walked and checked here (lengths, CRCs,
// IHDR, what is refused), Pillow's view of the metadata collected (tRNS,
// eXIf, XMP), and a normalised stream handed to stb_image for the pixels:
// signature, IHDR, PLTE padded with black to 256 entries (Pillow shows an
// index past the palette as black, stb would read uninitialised memory),
// the IDAT run, IEND. Ancillary and unknown chunks stay out of it, as Pillow
// ignores them for pixels; tRNS too, since convert("RGB") drops alpha.
// stb_image is compiled here, once, with only its PNG decoder, static.
// Every allocation it makes is capped at what a genuine image of the
// header's size needs, so image data that inflates without end (a zlib
// bomb) fails instead of taking the machine's memory.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "io/image_decoders.h"
#include "io/png.h"
#include "util/error.h"

namespace {

// Bytes stb may allocate at once while decoding the current image.
thread_local size_t t_allocation_cap = 0;

void* capped_malloc(size_t size) { return size > t_allocation_cap ? nullptr : std::malloc(size); }
void* capped_realloc(void* p, size_t size) { return size > t_allocation_cap ? nullptr : std::realloc(p, size); }

}  // namespace

#define STB_IMAGE_IMPLEMENTATION
#define STBI_MALLOC(size) capped_malloc(size)
#define STBI_REALLOC(p, size) capped_realloc(p, size)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 16384
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb_image.h>
#pragma GCC diagnostic pop

static_assert(STBI_MAX_DIMENSIONS == ditgen::io::kMaxImageSide);

namespace ditgen::io {
namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

void append_chunk(std::string& out, const char type[4], std::string_view data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.append(type, 4);
  out.append(data);
  put_be32(out, png_crc32(reinterpret_cast<const uint8_t*>(out.data()) + type_at, 4 + data.size()));
}

struct Chunk {
  std::string_view type;  // 4 bytes
  std::string_view data;
};

struct Header {
  uint32_t width = 0, height = 0;
  int depth = 0, colour_type = 0, interlace = 0;
};

bool valid_depth(int colour_type, int depth) {
  switch (colour_type) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2: case 4: case 6: return depth == 8 || depth == 16;
    default: return false;
  }
}

// The colour info["transparency"] names once load_image has converted the
// image to RGB (Pillow 13's PngImagePlugin.chunk_tRNS, then Image.convert).
std::optional<std::array<int32_t, 3>> transparency_of(const Header& h, std::string_view trns,
                                                      std::string_view palette) {
  auto u16 = [&](size_t at) { return int32_t(uint8_t(trns[at])) << 8 | int32_t(uint8_t(trns[at + 1])); };
  if (h.colour_type == 0 && trns.size() >= 2) {
    // Mode "1" keeps 0 or 255; mode "L" the raw value (not scaled for 2 or
    // 4 bits), clipped to 255 when put into a pixel.
    const int32_t g = h.depth == 1 ? (u16(0) ? 255 : 0) : std::min(u16(0), 255);
    return std::array<int32_t, 3>{g, g, g};
  }
  if (h.colour_type == 2 && trns.size() >= 6) return std::array<int32_t, 3>{u16(0), u16(2), u16(4)};
  if (h.colour_type == 3) {
    // Only a tRNS of 0xff bytes around a single 0x00 names one colour (the
    // regular expression ^\xff*\x00\xff*$, whose $ also matches before a
    // final newline); any other is a per-entry alpha table, dropped.
    std::string_view body = trns;
    if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    const size_t zero = body.find('\0');
    if (zero == std::string_view::npos || body.find_first_not_of('\xff', zero + 1) != std::string_view::npos ||
        body.find_first_not_of('\xff') != zero)
      return std::nullopt;
    if (3 * zero + 3 > palette.size()) return std::array<int32_t, 3>{0, 0, 0};
    return std::array<int32_t, 3>{uint8_t(palette[3 * zero]), uint8_t(palette[3 * zero + 1]),
                                  uint8_t(palette[3 * zero + 2])};
  }
  return std::nullopt;
}

// Text chunks Pillow reads metadata from: tEXt "exif" (info["exif"]) and
// "XML:com.adobe.xmp", uncompressed iTXt "XML:com.adobe.xmp". Compressed
// text (zTXt, compressed iTXt) is not read.
void read_text_chunk(const Chunk& c, StoredImage& out, std::optional<std::string>& xmp_text,
                     std::optional<std::string>& xmp_bytes) {
  constexpr std::string_view kXmpKey = "XML:com.adobe.xmp";
  const size_t nul = c.data.find('\0');
  const std::string_view key = c.data.substr(0, nul);
  if (c.type == "tEXt") {
    const std::string_view value = nul == std::string_view::npos ? std::string_view() : c.data.substr(nul + 1);
    if (key == "exif") out.exif = std::string(value);
    if (key == kXmpKey) xmp_text = std::string(value);
    return;
  }
  // iTXt: key NUL, compression flag, method, language NUL, translated key NUL, text
  if (key != kXmpKey || nul == std::string_view::npos || c.data.size() - nul - 1 < 2) return;
  std::string_view rest = c.data.substr(nul + 1);
  const bool compressed = rest[0] != 0;
  rest.remove_prefix(2);
  const size_t lang_end = rest.find('\0');
  if (lang_end == std::string_view::npos) return;
  const size_t key_end = rest.find('\0', lang_end + 1);
  if (key_end == std::string_view::npos || compressed) return;
  xmp_bytes = std::string(rest.substr(key_end + 1));
  xmp_text = xmp_bytes;  // Pillow also keeps it as text when it is UTF-8; the search is the same
}

}  // namespace

StoredImage decode_png(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits) {
  auto fail = [&](const std::string& why) -> ConfigError { return ConfigError(name + ": " + why); };
  if (size < 8 || std::memcmp(data, kSignature, 8) != 0) throw fail("not a PNG file");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  StoredImage out;
  Header h;
  std::string_view palette, trns;
  std::string idat;
  bool seen_header = false, seen_idat = false, idat_run_over = false, seen_end = false;
  std::optional<std::string> xmp_text, xmp_bytes;
  for (size_t at = 8; !seen_end;) {
    if (size - at < 12) throw fail("truncated PNG (" + std::string(at == size ? "no IEND chunk" : "a chunk header cut off") + ")");
    const uint32_t length = be32(data + at);
    if (length > 0x7fffffffu || length > size - at - 12) throw fail("truncated PNG (a chunk runs past the end of the file)");
    const Chunk c{bytes.substr(at + 4, 4), bytes.substr(at + 8, length)};
    if (png_crc32(data + at + 4, 4 + length) != be32(data + at + 8 + length))
      throw fail("corrupt PNG (CRC mismatch in chunk '" + std::string(c.type) + "')");
    at += 12 + length;

    if (!seen_header) {
      if (c.type == "CgBI") throw fail("Apple's CgBI PNG variant is not supported (not a standard PNG)");
      if (c.type != "IHDR" || length != 13) throw fail("corrupt PNG (does not start with an IHDR chunk)");
      const auto* p = reinterpret_cast<const uint8_t*>(c.data.data());
      h = {be32(p), be32(p + 4), p[8], p[9], p[12]};
      if (h.width == 0 || h.height == 0)
        throw fail("the image has zero width or height (" + std::to_string(h.width) + " x " + std::to_string(h.height) + ")");
      if (!valid_depth(h.colour_type, h.depth) || p[10] != 0 || p[11] != 0 || h.interlace > 1)
        throw fail("corrupt PNG (invalid IHDR: colour type " + std::to_string(h.colour_type) + ", bit depth " +
                   std::to_string(h.depth) + ")");
      if (h.colour_type == 0 && h.depth == 16)
        throw fail("16-bit greyscale PNG is not supported (Pillow, and so diffusers, clips its values to 255: "
                   "save it with 8 bits per sample)");
      check_image_size(h.width, h.height, name, limits);
      seen_header = true;
      continue;
    }
    if (c.type == "IDAT") {
      if (idat_run_over) throw fail("corrupt PNG (IDAT chunks are not consecutive)");
      idat.append(c.data);
      seen_idat = true;
      continue;
    }
    if (seen_idat) idat_run_over = true;
    if (c.type == "IEND") {
      seen_end = true;
    } else if (c.type == "IHDR") {
      throw fail("corrupt PNG (a second IHDR chunk)");
    } else if (c.type == "acTL") {
      throw fail("animated PNG (APNG) is not supported");
    } else if (c.type == "PLTE") {
      if (length == 0 || length % 3 != 0 || length > 256 * 3) throw fail("corrupt PNG (invalid PLTE chunk)");
      palette = c.data;
    } else if (c.type == "tRNS") {
      trns = c.data;
    } else if (c.type == "eXIf") {
      out.exif = std::string("Exif\0\0", 6) + std::string(c.data);  // as Pillow stores it
    } else if (c.type == "tEXt" || c.type == "iTXt") {
      read_text_chunk(c, out, xmp_text, xmp_bytes);
    }
  }
  if (!seen_idat) throw fail("corrupt PNG (no image data)");
  if (h.colour_type == 3 && palette.empty()) throw fail("corrupt PNG (a palette image without a PLTE chunk)");
  out.transparency = transparency_of(h, trns, palette);
  out.xmp = xmp_text && !xmp_text->empty() ? xmp_text : xmp_bytes;

  std::string stream(reinterpret_cast<const char*>(kSignature), 8);
  append_chunk(stream, "IHDR", bytes.substr(16, 13));
  if (h.colour_type == 3) {
    std::string full_palette(palette);
    full_palette.resize(256 * 3, '\0');
    append_chunk(stream, "PLTE", full_palette);
  }
  // One IDAT of at most 2^31 - 1 bytes (the stream's limit per chunk).
  if (idat.size() > 0x7fffffffu) throw fail("PNG image data over 2 GiB is not supported");
  append_chunk(stream, "IDAT", idat);
  append_chunk(stream, "IEND", "");

  // A genuine image's largest buffer: its inflated rows, at most 8 bytes a
  // pixel (16-bit RGBA) and a filter byte a row, which stb may grow once by
  // doubling; the compressed data, which cannot be much larger; room for
  // stb's small buffers.
  const size_t raw = size_t(h.height) * (size_t(h.width) * 8 + 1);
  t_allocation_cap = std::max(2 * raw, idat.size() + 1024) + (size_t(1) << 20);
  int width = 0, height = 0, channels = 0;
  stbi_uc* pixels = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(stream.data()),
                                          static_cast<int>(stream.size()), &width, &height, &channels, 3);
  t_allocation_cap = 0;
  if (!pixels) {
    const std::string why = stbi_failure_reason();
    if (why == "outofmem")
      throw fail("corrupt PNG image data (it inflates to more than a " + std::to_string(h.width) + " x " +
                 std::to_string(h.height) + " image holds)");
    throw fail("corrupt PNG image data (stb_image: " + why + ")");
  }
  if (uint32_t(width) != h.width || uint32_t(height) != h.height) {
    stbi_image_free(pixels);
    throw fail("corrupt PNG (decoded size differs from IHDR)");
  }
  out.rgb = RgbImage::blank(width, height);
  std::memcpy(out.rgb.pixels.data(), pixels, out.rgb.pixels.size());
  stbi_image_free(pixels);
  return out;
}

}  // namespace ditgen::io
