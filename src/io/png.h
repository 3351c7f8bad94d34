// PNG output: 8-bit images encoded by stb_image_write, with text metadata
// chunks (webui-style "parameters") inserted right after IHDR, written
// atomically (temporary name + rename). Also the float -> 8-bit conversion
// that diffusers' numpy_to_pil performs, so PNG bytes match the reference.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::io {

using PngText = std::vector<std::pair<std::string, std::string>>;

// `pixels`: interleaved, row-major, `channels` in 1..4 (gray, gray+alpha, RGB,
// RGBA). One tEXt chunk per (key, value); a value with bytes outside ASCII is
// taken as UTF-8 and goes into an iTXt chunk instead. Keys must be 1..79
// printable ASCII characters without leading or trailing spaces
// (std::invalid_argument otherwise). NUL bytes in values are not
// representable and are replaced by spaces.
// I/O failures: RuntimeFailure naming the path.
void write_png(const std::string& path, const uint8_t* pixels, int width, int height, int channels,
               const PngText& text = {});

// The encoded PNG file (signature, IHDR, text chunks, image data, IEND).
std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels, const PngText& text = {});

// A planar float image [channels, height, width] in [0, 1] to interleaved
// 8-bit: clamp to [0, 1], then round(x * 255) with ties to even, in float32,
// exactly as numpy's (x * 255).round().astype(uint8). NaN becomes 0.
std::vector<uint8_t> float_image_to_rgb8(const float* chw, int channels, int height, int width);
// Same for a tensor of shape [C, H, W].
std::vector<uint8_t> float_image_to_rgb8(const Tensor& chw);

// Reads a PNG's pixels as 8-bit RGB (interleaved, row-major; gray and
// alpha converted as io/image_reader.h does), for a resumed run's contact sheet
// (output_writer.h, read_back): false when the file is missing, not a
// PNG, or not `width` x `height` (0: any size). The image is checked by
// size before its pixels are decoded.
bool read_png_rgb(const std::string& path, int width, int height, std::vector<uint8_t>& pixels, int& out_width,
                  int& out_height);

// CRC-32 as PNG chunks use it (ISO 3309 / zlib polynomial).
uint32_t png_crc32(const uint8_t* bytes, size_t size, uint32_t crc = 0);

}  // namespace ditgen::io
