// Input images (image-to-video): a PNG or JPEG file read into 8-bit RGB
// exactly as diffusers' load_image gives it to a pipeline under Pillow 13,
// i.e. PIL.Image.open, ImageOps.exif_transpose, then convert("RGB"):
//
//  - PNG (stb_image, with the stream checked and normalised first; see
//    png_input.cpp): grey is replicated to R=G=B, 1/2/4-bit grey scaled to
//    0..255, palette indices looked up (an index past the palette is black,
//    as in Pillow), alpha and tRNS dropped, never composited (convert("RGB")
//    drops alpha); 16-bit RGB, RGBA and grey+alpha keep each sample's high
//    byte, as Pillow does. Refused: 16-bit greyscale (Pillow clips its 0..65535
//    values to 255, a near-white image no one means), animated PNG, Apple's
//    CgBI variant. Every chunk's CRC is checked.
//  - JPEG (libjpeg-turbo, the library Pillow decodes with, default settings:
//    byte-equal to Pillow's pixels): greyscale, YCbCr and RGB JPEGs,
//    baseline or progressive. Refused: CMYK / YCCK JPEGs and a file cut off
//    before its end (Pillow: "image file is truncated").
//  - The EXIF orientation (io/exif_orientation.h) applied after decoding.
//
// Limits: at most kMaxImageSide pixels a side and kMaxImagePixels pixels in
// all (Pillow's own decompression-bomb limit, above which diffusers' loader
// refuses the image too), and files of at most kMaxImageFileBytes.
//
// Every failure is a ConfigError (exit 2): the image is a value the user
// gave, like any other config field. Its message starts with the file's path
// and says what is wrong: missing, unreadable, a directory or other
// non-regular file, empty, neither
// PNG nor JPEG, truncated, corrupt, zero width or height, beyond the limits,
// or of a kind refused above. Callers prefix the config field.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "io/rgb_image.h"

namespace ditgen::io {

constexpr int64_t kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = 178956970;  // 2 * PIL.Image.MAX_IMAGE_PIXELS
constexpr int64_t kMaxImageFileBytes = int64_t(1) << 30;

struct ImageLimits {
  int64_t max_side = kMaxImageSide;
  int64_t max_pixels = kMaxImagePixels;
};

struct DecodedImage {
  std::string format;  // "png" or "jpeg"
  RgbImage rgb;        // oriented, (H, W, 3)
  int64_t orientation = 1;  // the EXIF orientation applied (1: none)
  // The colour Pillow still lists as info["transparency"] after load_image's
  // convert("RGB") (a PNG's tRNS for grey, RGB, or a palette with one fully
  // transparent entry), as R, G, B; values above 255 match no pixel.
  // transformers' CLIP image processor paints pixels of exactly this colour
  // white (io/clip_image_processor.h); the VAE input keeps them.
  std::optional<std::array<int32_t, 3>> transparency;
};

struct InputImage {
  std::string path;
  std::string sha256;  // of the file's bytes, 64 hex digits (for the output's metadata)
  DecodedImage image;
};

// Reads and decodes `path`. ConfigError naming `path` on any failure.
InputImage read_input_image(const std::string& path, const ImageLimits& limits = {});

// Decodes a PNG or JPEG held in memory; `name` stands for the file in
// messages. ConfigError on any failure (the fuzz target's entry point).
DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& name,
                          const ImageLimits& limits = {});

}  // namespace ditgen::io
