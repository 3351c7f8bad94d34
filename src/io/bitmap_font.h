// A built-in 5x7 pixel bitmap font for labels drawn into RGB8 images
// (contact-sheet captions, plot tick labels): printable ASCII 32..126, one
// constexpr row bitmap per glyph (5 wide, 7 rows down to the baseline plus
// a descender row so g j p q y stay recognisable); every other byte draws
// as a hollow box, so unsupported text is visibly wrong rather than
// silently dropped. Glyphs scale by whole pixels (crisp at any size) and
// drawing clips to the target window, so callers may place text anywhere,
// off-image included.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ditgen::io {

inline constexpr int kGlyphWidth = 5;    // ink columns per glyph
inline constexpr int kGlyphHeight = 8;   // rows per glyph: 7 down to the baseline, 1 descender
inline constexpr int kGlyphAdvance = 6;  // pen step: one blank column between glyphs
inline constexpr int kLineHeight = 9;    // suggested baseline-to-baseline distance (1 blank row)

using Rgb = std::array<uint8_t, 3>;

// Rows top to bottom; in each row bit 4 (0x10) is the leftmost column.
using Glyph = std::array<uint8_t, kGlyphHeight>;

// The glyph for byte `c`: its own for 32..126, the box glyph otherwise.
const Glyph& font_glyph(char c);
// The glyph drawn for characters outside 32..126.
const Glyph& box_glyph();

// Width in pixels a string occupies: kGlyphAdvance * text.size() * scale,
// the trailing blank column included (so widths of pieces add up).
// Saturates at INT_MAX. scale < 1: std::invalid_argument.
int text_width(std::string_view text, int scale = 1);

// A writable window onto an RGB8 buffer: width x height pixels, 3 bytes
// each, rows `stride` bytes apart (3 * width for a whole image; larger for
// a sub-rectangle of a bigger image).
struct RgbCanvas {
  uint8_t* pixels = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;
};

// Draws `text` on one line with its top-left glyph corner at (x, y), each
// font pixel a scale x scale block of `colour`; background pixels are left
// as they are. Only pixels inside the canvas are written, for any x and y
// (negative or far outside included). scale < 1, or a null buffer with a
// non-empty canvas: std::invalid_argument.
void draw_text(const RgbCanvas& canvas, int x, int y, std::string_view text, Rgb colour, int scale = 1);

// The same on a whole row-major height x width x 3 image.
void draw_text(uint8_t* rgb, int width, int height, int x, int y, std::string_view text, Rgb colour,
               int scale = 1);

}  // namespace ditgen::io
