// The 5x7 label font: glyphs that are present and tell each other apart,
// widths that follow the advance, known glyphs landing on known pixels, and
// drawing that clips exactly. Clipping is checked against a naive reference
// renderer (per font pixel, per scaled sub-pixel, bounds-tested) on a canvas
// cut out of a larger buffer whose canary border must survive untouched.
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/bitmap_font.h"

using namespace ditgen::io;

namespace {

bool is_blank(const Glyph& g) {
  for (uint8_t row : g)
    if (row) return false;
  return true;
}

// What draw_text must produce: every scaled font pixel that lies inside the image.
void reference_draw(std::vector<uint8_t>& img, int w, int h, int x, int y, const std::string& text, Rgb colour,
                    int scale) {
  for (size_t i = 0; i < text.size(); ++i) {
    const Glyph& g = font_glyph(text[i]);
    for (int r = 0; r < kGlyphHeight; ++r)
      for (int c = 0; c < kGlyphWidth; ++c) {
        if (!(g[r] & (0x10 >> c))) continue;
        for (int a = 0; a < scale; ++a)
          for (int b = 0; b < scale; ++b) {
            const int64_t px = int64_t{x} + (static_cast<int64_t>(i) * kGlyphAdvance + c) * scale + b;
            const int64_t py = int64_t{y} + int64_t{r} * scale + a;
            if (px < 0 || py < 0 || px >= w || py >= h) continue;
            for (int ch = 0; ch < 3; ++ch) img[(py * w + px) * 3 + ch] = colour[ch];
          }
      }
  }
}

// Which pixels of a w x h image `text` sets, as rows of '#' (ink) and '.'.
std::vector<std::string> ink_map(int w, int h, int x, int y, const std::string& text, int scale) {
  std::vector<uint8_t> img(static_cast<size_t>(w) * h * 3, 0);
  draw_text(img.data(), w, h, x, y, text, {255, 255, 255}, scale);
  std::vector<std::string> rows(h, std::string(w, '.'));
  for (int py = 0; py < h; ++py)
    for (int px = 0; px < w; ++px)
      if (img[(static_cast<size_t>(py) * w + px) * 3]) rows[py][px] = '#';
  return rows;
}

}  // namespace

TEST_CASE("every printable glyph is distinct from the others and from the box, only space is blank") {
  const std::string required = "abcdefghijklmnopqrstuvwxyz0123456789-_.,:()/#+";
  for (char c : required) CHECK_MESSAGE(!is_blank(font_glyph(c)), "glyph '" << c << "' is blank");
  CHECK(is_blank(font_glyph(' ')));

  std::set<Glyph> seen{box_glyph()};
  for (int c = 32; c <= 126; ++c) {
    const Glyph& g = font_glyph(static_cast<char>(c));
    if (c != ' ') CHECK_MESSAGE(!is_blank(g), "glyph '" << char(c) << "' is blank");
    CHECK_MESSAGE(seen.insert(g).second, "glyph '" << char(c) << "' repeats another glyph or the box");
    for (uint8_t row : g) CHECK(row < (1 << kGlyphWidth));
  }
}

TEST_CASE("only g j p q y , , reach below the baseline") {
  for (int c = 32; c <= 126; ++c) {
    const bool descends = font_glyph(static_cast<char>(c))[kGlyphHeight - 1] != 0;
    CHECK_MESSAGE(descends == (std::string("gjpqy,;").find(char(c)) != std::string::npos), "glyph '" << char(c) << "'");
  }
  CHECK(ink_map(7, 9, 1, 0, "g", 1) == std::vector<std::string>{
                                           ".......",
                                           ".......",
                                           "..####.",
                                           ".#...#.",
                                           ".#...#.",
                                           "..####.",
                                           ".....#.",
                                           "..###..",
                                           ".......",
                                       });
}

TEST_CASE("bytes outside printable ASCII draw as the box") {
  for (char c : {'\0', '\t', '\n', '\x1f', '\x7f', '\x80', '\xc3', '\xff'}) CHECK(font_glyph(c) == box_glyph());
  CHECK(ink_map(7, 9, 1, 1, "\x01", 1) == std::vector<std::string>{
                                              ".......",
                                              ".#####.",
                                              ".#...#.",
                                              ".#...#.",
                                              ".#...#.",
                                              ".#...#.",
                                              ".#...#.",
                                              ".#####.",
                                              ".......",
                                          });
}

TEST_CASE("text width is advance x length x scale") {
  CHECK(text_width("") == 0);
  CHECK(text_width("a") == kGlyphAdvance);
  for (int scale : {1, 2, 3, 7})
    for (const std::string s : {"", "x", "class 207", "magenta triangle"})
      CHECK(text_width(s, scale) == kGlyphAdvance * static_cast<int>(s.size()) * scale);
  CHECK(text_width("ab", INT_MAX) == INT_MAX);  // saturates instead of overflowing
  CHECK_THROWS_AS(text_width("a", 0), std::invalid_argument);
}

TEST_CASE("known glyphs land on the expected pixels") {
  CHECK(ink_map(9, 10, 2, 1, "L", 1) == std::vector<std::string>{
                                            ".........",
                                            "..#......",
                                            "..#......",
                                            "..#......",
                                            "..#......",
                                            "..#......",
                                            "..#......",
                                            "..#####..",
                                            ".........",
                                            ".........",
                                        });
  // '1' then 'L' at scale 2: 2x2 blocks, the second glyph 12 px to the right.
  CHECK(ink_map(24, 15, 0, 0, "1L", 2) == std::vector<std::string>{
                                              "....##......##..........",
                                              "....##......##..........",
                                              "..####......##..........",
                                              "..####......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "....##......##..........",
                                              "..######....##########..",
                                              "..######....##########..",
                                              "........................",
                                          });
}

TEST_CASE("drawing clips at every edge and never writes outside the canvas") {
  // The canvas is a W x H window at (G, G) of a larger buffer: a write past
  // any edge, a wrong stride or a wrap-around lands in the canary border.
  constexpr int W = 23, H = 17, G = 6, BW = W + 2 * G, BH = H + 2 * G;
  constexpr uint8_t kCanary = 0xA5;
  const Rgb colour = {10, 200, 30};
  const std::string text = "Ag_(1)/#\x7f";
  const std::vector<int> xs = {INT_MIN, -1000, -60, -13, -7, -5, -1, 0, 3, W - 6, W - 5, W - 1, W, W + 4, INT_MAX};
  const std::vector<int> ys = {INT_MIN, -1000, -21, -7, -6, -1, 0, 2, H - 7, H - 3, H - 1, H, H + 9, INT_MAX};
  for (int scale : {1, 2, 3}) {
    for (int x : xs) {
      for (int y : ys) {
        CAPTURE(scale);
        CAPTURE(x);
        CAPTURE(y);
        std::vector<uint8_t> buffer(static_cast<size_t>(BW) * BH * 3, kCanary);
        for (int row = 0; row < H; ++row)
          std::fill_n(buffer.begin() + ((static_cast<size_t>(row) + G) * BW + G) * 3, W * 3, uint8_t{0});
        const RgbCanvas canvas{buffer.data() + (static_cast<size_t>(G) * BW + G) * 3, W, H, BW * 3};
        draw_text(canvas, x, y, text, colour, scale);

        std::vector<uint8_t> expected(static_cast<size_t>(W) * H * 3, 0);
        reference_draw(expected, W, H, x, y, text, colour, scale);
        bool inside_matches = true, border_intact = true;
        for (int by = 0; by < BH; ++by)
          for (int bx = 0; bx < BW; ++bx)
            for (int ch = 0; ch < 3; ++ch) {
              const uint8_t got = buffer[(static_cast<size_t>(by) * BW + bx) * 3 + ch];
              const bool inside = bx >= G && bx < G + W && by >= G && by < G + H;
              if (inside)
                inside_matches &= got == expected[((static_cast<size_t>(by) - G) * W + bx - G) * 3 + ch];
              else
                border_intact &= got == kCanary;
            }
        CHECK(inside_matches);
        CHECK(border_intact);
      }
    }
  }
}

TEST_CASE("a string starting far left shows only its tail, whole-image overload matches the canvas one") {
  // "ABC" at x = -12: 'A' and 'B' are fully off the left edge, 'C' at 0.
  CHECK(ink_map(6, 7, -12, 0, "ABC", 1) == ink_map(6, 7, 0, 0, "C", 1));
  std::vector<uint8_t> a(10 * 8 * 3, 0), b(10 * 8 * 3, 0);
  draw_text(a.data(), 10, 8, -3, 1, "xy", {1, 2, 3}, 1);
  draw_text(RgbCanvas{b.data(), 10, 8, 30}, -3, 1, "xy", {1, 2, 3}, 1);
  CHECK(a == b);
}

TEST_CASE("bad arguments") {
  std::vector<uint8_t> img(4 * 4 * 3, 0);
  CHECK_THROWS_AS(draw_text(img.data(), 4, 4, 0, 0, "a", {0, 0, 0}, 0), std::invalid_argument);
  CHECK_THROWS_AS(draw_text(nullptr, 4, 4, 0, 0, "a", {0, 0, 0}, 1), std::invalid_argument);
  // An empty canvas or empty text draws nothing, even with no buffer.
  CHECK_NOTHROW(draw_text(nullptr, 0, 0, 0, 0, "a", {0, 0, 0}, 1));
  CHECK_NOTHROW(draw_text(img.data(), 4, 4, 0, 0, "", {9, 9, 9}, 1));
  CHECK(img == std::vector<uint8_t>(4 * 4 * 3, 0));
}
