// Contact sheets: sheet sizes for several tile counts and column settings,
// every tile pixel found where a plain loop says it must be (enlarged,
// centred in its cell), everything else background or caption strip,
// captions cut with "..." and kept inside their own strip, mixed tile
// sizes, argument errors, and the PNG written through the common writer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/contact_sheet.h"
#include "temp_dir.h"

using namespace ditgen::io;

namespace {

// Small, explicit options so expected sizes are easy to write down.
ContactSheetOptions test_options(int columns) {
  ContactSheetOptions o;
  o.columns = columns;
  o.min_tile_width = 96;
  o.padding = 8;
  o.font_scale = 1;
  o.caption_margin = 3;
  o.background = {96, 96, 96};
  o.caption_background = {240, 240, 240};
  o.caption_colour = {20, 20, 20};
  return o;
}
constexpr int kCaptionHeight = 8 + 2 * 3;  // glyph height (descender row included) + margins, at font scale 1

Rgb tile_pixel(int k, int i, int j) {
  return {static_cast<uint8_t>(k * 37 + i * 5), static_cast<uint8_t>(j * 11 + k), static_cast<uint8_t>(i ^ j ^ k)};
}

Tile make_tile(int k, int w, int h, std::string caption = "") {
  Tile t{{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)}, std::move(caption)};
  for (int j = 0; j < h; ++j)
    for (int i = 0; i < w; ++i) {
      const Rgb p = tile_pixel(k, i, j);
      std::copy(p.begin(), p.end(), t.image.pixels.begin() + (static_cast<size_t>(j) * w + i) * 3);
    }
  return t;
}

std::vector<Tile> square_tiles(int n, int side) {
  std::vector<Tile> tiles;
  for (int k = 0; k < n; ++k) tiles.push_back(make_tile(k, side, side, "tile " + std::to_string(k)));
  return tiles;
}

Rgb pixel(const RgbImage& im, int x, int y) {
  const size_t at = (static_cast<size_t>(y) * im.width + x) * 3;
  return {im.pixels[at], im.pixels[at + 1], im.pixels[at + 2]};
}

int enlargement(int width, int min_width) { return std::max(1, (min_width + width - 1) / width); }

// Checks every sheet pixel: tile k's pixel (i, j) must fill the s x s block
// at its cell's origin plus the centring offset plus (i * s, j * s); caption
// strips hold only caption background and caption colour; all the rest is
// background. Written as plain loops, independent of the layout code.
void check_sheet_pixels(const RgbImage& sheet, const std::vector<Tile>& tiles, const ContactSheetOptions& o,
                        int columns) {
  int cell_w = 0, image_h = 0;
  for (const Tile& t : tiles) {
    const int s = enlargement(t.image.width, o.min_tile_width);
    cell_w = std::max(cell_w, static_cast<int>(t.image.width) * s);
    image_h = std::max(image_h, static_cast<int>(t.image.height) * s);
  }
  const int cell_h = image_h + kCaptionHeight;
  enum Owner : uint8_t { kBackground, kTile, kCaption };
  std::vector<uint8_t> owner(static_cast<size_t>(sheet.width) * sheet.height, kBackground);
  size_t wrong_tile_pixels = 0;
  for (size_t k = 0; k < tiles.size(); ++k) {
    const RgbImage& im = tiles[k].image;
    const int s = enlargement(im.width, o.min_tile_width);
    const int cell_x = o.padding + static_cast<int>(k % columns) * (cell_w + o.padding);
    const int cell_y = o.padding + static_cast<int>(k / columns) * (cell_h + o.padding);
    const int ox = cell_x + (cell_w - im.width * s) / 2, oy = cell_y + (image_h - im.height * s) / 2;
    for (int j = 0; j < im.height; ++j)
      for (int i = 0; i < im.width; ++i)
        for (int a = 0; a < s; ++a)
          for (int b = 0; b < s; ++b) {
            const int x = ox + i * s + b, y = oy + j * s + a;
            if (x < 0 || y < 0 || x >= sheet.width || y >= sheet.height) {
              FAIL("tile " << k << " pixel (" << i << ", " << j << ") belongs outside the sheet");
            }
            if (pixel(sheet, x, y) != tile_pixel(static_cast<int>(k), i, j)) ++wrong_tile_pixels;
            owner[static_cast<size_t>(y) * sheet.width + x] = kTile;
          }
    for (int y = cell_y + image_h; y < cell_y + cell_h; ++y)
      for (int x = cell_x; x < cell_x + cell_w; ++x) owner[static_cast<size_t>(y) * sheet.width + x] = kCaption;
  }
  CHECK(wrong_tile_pixels == 0);
  size_t wrong_other_pixels = 0;
  for (int y = 0; y < sheet.height; ++y)
    for (int x = 0; x < sheet.width; ++x) {
      const uint8_t who = owner[static_cast<size_t>(y) * sheet.width + x];
      const Rgb p = pixel(sheet, x, y);
      if (who == kBackground && p != o.background) ++wrong_other_pixels;
      if (who == kCaption && p != o.caption_background && p != o.caption_colour) ++wrong_other_pixels;
    }
  CHECK(wrong_other_pixels == 0);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("sheet size for 1, 5 and 30 tiles with 5 columns and with automatic columns") {
  struct Case {
    int n, columns, expected_columns;
  };
  // Automatic: ceil(sqrt(n)); explicit: at most n.
  for (const Case c : {Case{1, 5, 1}, Case{5, 5, 5}, Case{30, 5, 5}, Case{1, 0, 1}, Case{5, 0, 3}, Case{30, 0, 6}}) {
    CAPTURE(c.n);
    CAPTURE(c.columns);
    const auto tiles = square_tiles(c.n, 32);
    const ContactSheetOptions o = test_options(c.columns);
    const RgbImage sheet = make_contact_sheet(tiles, o);
    const int rows = (c.n + c.expected_columns - 1) / c.expected_columns;
    // 32 px tiles are enlarged 3x to reach 96 px.
    CHECK(sheet.width == c.expected_columns * 96 + (c.expected_columns + 1) * 8);
    CHECK(sheet.height == rows * (96 + kCaptionHeight) + (rows + 1) * 8);
    CHECK(sheet.pixels.size() == static_cast<size_t>(sheet.width) * sheet.height * 3);

    const ContactSheetLayout L = layout_contact_sheet(tiles, o);
    CHECK(L.columns == c.expected_columns);
    CHECK(L.rows == rows);
    CHECK(L.width == sheet.width);
    CHECK(L.height == sheet.height);
    CHECK(L.caption_height == kCaptionHeight);
    CHECK(std::all_of(L.tile_scale.begin(), L.tile_scale.end(), [](int s) { return s == 3; }));
    check_sheet_pixels(sheet, tiles, o, c.expected_columns);
  }
}

TEST_CASE("default enlargement: 32 px tiles grow, 256 px tiles stay as they are") {
  const ContactSheetLayout small = layout_contact_sheet(square_tiles(2, 32));
  CHECK(small.tile_scale == std::vector<int>{4, 4});
  CHECK(small.cell_width == 128);
  const ContactSheetLayout large = layout_contact_sheet(square_tiles(2, 256));
  CHECK(large.tile_scale == std::vector<int>{1, 1});
  CHECK(large.cell_width == 256);
  ContactSheetOptions never;
  never.min_tile_width = 0;
  CHECK(layout_contact_sheet(square_tiles(1, 32), never).tile_scale == std::vector<int>{1});
}

TEST_CASE("tiles of different sizes: the cell fits the largest, each tile centred and enlarged on its own") {
  // Enlarged to 96x96, 100x50, 100x300 and 98x42: cells are 100 x (300 + caption).
  const std::vector<Tile> tiles = {make_tile(0, 32, 32, "square"), make_tile(1, 100, 50, "wide"),
                                   make_tile(2, 20, 60, "tall"), make_tile(3, 7, 3, "tiny")};
  const ContactSheetOptions o = test_options(0);
  const RgbImage sheet = make_contact_sheet(tiles, o);
  CHECK(sheet.width == 2 * 100 + 3 * 8);
  CHECK(sheet.height == 2 * (300 + kCaptionHeight) + 3 * 8);
  const ContactSheetLayout L = layout_contact_sheet(tiles, o);
  CHECK(L.tile_scale == std::vector<int>{3, 1, 5, 14});
  CHECK(L.cell_width == 100);
  CHECK(L.image_height == 300);
  check_sheet_pixels(sheet, tiles, o, 2);

  // The same with three columns (two rows, one cell empty).
  const ContactSheetOptions three = test_options(3);
  const RgbImage wide = make_contact_sheet(tiles, three);
  CHECK(wide.width == 3 * 100 + 4 * 8);
  check_sheet_pixels(wide, tiles, three, 3);
}

TEST_CASE("fit_caption keeps what fits and cuts the rest with an ellipsis") {
  // n glyphs need 6n - 1 pixels at scale 1.
  CHECK(fit_caption("magenta triangle", 95) == "magenta triangle");  // 16 glyphs, exactly 95 px
  CHECK(fit_caption("magenta triangle", 94) == "magenta tria...");    // 15 glyphs fit
  CHECK(fit_caption("magenta triangle", 90) == "magenta tria...");
  CHECK(fit_caption("red circle blue", 47) == "red c...");  // 8 glyphs fit
  CHECK(fit_caption("red circle blue", 41) == "red...");    // 7 glyphs fit; the cut "red " loses its space
  CHECK(fit_caption("abcdef", 17) == "...");                // 3 glyphs fit: nothing of the caption itself
  CHECK(fit_caption("abcdef", 11) == "..");
  CHECK(fit_caption("abcdef", 4) == "");
  CHECK(fit_caption("abcdef", -5) == "");
  CHECK(fit_caption("", 0) == "");
  CHECK(fit_caption("magenta triangle", 2 * 95, 2) == "magenta triangle");
  CHECK(fit_caption("magenta triangle", 2 * 95 - 1, 2) == "magenta tria...");
}

TEST_CASE("a caption longer than its cell is cut with ... and stays inside its own strip") {
  // Tile 0 has a long caption, its right neighbour and the tile below have none:
  // their strips and every padding pixel must stay plain.
  std::vector<Tile> tiles = {make_tile(0, 32, 32, "a caption far too long for its cell, really"),
                             make_tile(1, 32, 32, ""), make_tile(2, 32, 32, "")};
  const ContactSheetOptions o = test_options(2);
  const RgbImage sheet = make_contact_sheet(tiles, o);
  check_sheet_pixels(sheet, tiles, o, 2);  // nothing outside strips and tiles is touched

  // Room inside the strip: 96 - 2 * 3 = 90 px, 15 glyphs.
  const std::string shown = fit_caption(tiles[0].caption, 90);
  CHECK(shown == "a caption fa...");
  // Strip 0 is exactly that text, centred, on the caption background.
  const int ink = 15 * 6 - 1;
  RgbImage expected{96, kCaptionHeight, {}};
  expected.pixels.resize(96 * kCaptionHeight * 3);
  for (size_t p = 0; p < expected.pixels.size(); p += 3)
    std::copy(o.caption_background.begin(), o.caption_background.end(), expected.pixels.begin() + p);
  draw_text(expected.pixels.data(), 96, kCaptionHeight, (96 - ink) / 2, 3, shown, o.caption_colour);
  const int strip_x = 8, strip_y = 8 + 96;
  int leftmost_ink = 96, rightmost_ink = -1;
  size_t mismatches = 0;
  for (int y = 0; y < kCaptionHeight; ++y)
    for (int x = 0; x < 96; ++x) {
      const Rgb got = pixel(sheet, strip_x + x, strip_y + y);
      if (got != pixel(expected, x, y)) ++mismatches;
      if (got == o.caption_colour) leftmost_ink = std::min(leftmost_ink, x), rightmost_ink = std::max(rightmost_ink, x);
    }
  CHECK(mismatches == 0);
  CHECK(leftmost_ink >= 3);
  CHECK(rightmost_ink <= 96 - 1 - 3);
  // The neighbours' strips hold no ink at all.
  for (int k : {1, 2}) {
    const int sx = 8 + (k % 2) * (96 + 8), sy = 8 + (k / 2) * (96 + kCaptionHeight + 8) + 96;
    size_t ink_pixels = 0;
    for (int y = 0; y < kCaptionHeight; ++y)
      for (int x = 0; x < 96; ++x) ink_pixels += pixel(sheet, sx + x, sy + y) != o.caption_background;
    CHECK(ink_pixels == 0);
  }

  // Larger glyphs than the strip is tall or wide are still confined to it.
  ContactSheetOptions big = test_options(2);
  big.font_scale = 4;
  big.caption_margin = 0;
  tiles[0].caption = "WWWWWWWWWWWWWWWWWWWWWWWWWWWW";
  const RgbImage big_sheet = make_contact_sheet(tiles, big);
  CHECK(big_sheet.height == 2 * (96 + 32) + 3 * 8);
  int big_ink_cols = 0;
  for (int x = 0; x < big_sheet.width; ++x)
    for (int y = 8 + 96; y < 8 + 96 + 32; ++y)
      if (pixel(big_sheet, x, y) == big.caption_colour) {
        CHECK((x >= 8 && x < 8 + 96));
        ++big_ink_cols;
        break;
      }
  CHECK(big_ink_cols > 0);
}

TEST_CASE("bad input is refused before anything is drawn") {
  CHECK_THROWS_AS(make_contact_sheet({}), std::invalid_argument);
  Tile short_pixels = make_tile(0, 4, 4);
  short_pixels.image.pixels.pop_back();
  CHECK_THROWS_AS(make_contact_sheet({short_pixels}), std::invalid_argument);
  CHECK_THROWS_AS(make_contact_sheet({Tile{{0, 4, {}}, ""}}), std::invalid_argument);
  ContactSheetOptions o;
  o.columns = -1;
  CHECK_THROWS_AS(make_contact_sheet(square_tiles(1, 4), o), std::invalid_argument);
  o = {};
  o.font_scale = 0;
  CHECK_THROWS_AS(make_contact_sheet(square_tiles(1, 4), o), std::invalid_argument);
  o = {};
  o.min_tile_width = 1 << 30;  // 2^30-wide cells: far beyond what a PNG can hold
  CHECK_THROWS_AS(layout_contact_sheet(square_tiles(1, 4), o), std::invalid_argument);
}

TEST_CASE("the sheet is written by the common PNG writer, text chunks included") {
  ditgen::testing::TempDir dir("ditgen_test_contact_sheet");
  const RgbImage sheet = make_contact_sheet(square_tiles(3, 8));
  const PngText text = {{"parameters", "3 tiles"}};
  const std::string path = dir.file("sheet.png");
  write_png(path, sheet, text);
  const std::vector<uint8_t> expected = encode_png(sheet.pixels.data(), sheet.width, sheet.height, 3, text);
  CHECK(read_all(path) == std::string(expected.begin(), expected.end()));
  CHECK_THROWS_AS(write_png(dir.file("bad.png"), RgbImage{2, 2, std::vector<uint8_t>(11)}), std::invalid_argument);
}

TEST_CASE("filmstrip captions run on under the uncaptioned tiles of their row, gaps included") {
  // Two rows of three: row 0 captioned on its first tile only, row 1 on its
  // first and last tiles. With caption_spans_empty row 0's strip is three
  // cells and two gaps wide, row 1's first strip two cells and a gap.
  std::vector<Tile> tiles = {make_tile(0, 32, 32, "a red circle moving right, long enough to need room"),
                             make_tile(1, 32, 32, ""), make_tile(2, 32, 32, ""),
                             make_tile(3, 32, 32, "first"), make_tile(4, 32, 32, ""), make_tile(5, 32, 32, "last")};
  ContactSheetOptions o = test_options(3);
  o.caption_spans_empty = true;
  const ContactSheetLayout L = layout_contact_sheet(tiles, o);
  CHECK(L.caption_width == std::vector<int>{3 * 96 + 2 * 8, 0, 0, 2 * 96 + 8, 0, 96});
  const RgbImage sheet = make_contact_sheet(tiles, o);
  // The whole caption fits the long strip: (304 - 6) / 6 = 49 glyphs.
  const std::string shown = fit_caption(tiles[0].caption, 3 * 96 + 2 * 8 - 6);
  CHECK(shown == "a red circle moving right, long enough to need...");
  // Row 0's band, gaps between its cells included, is exactly that text
  // centred on the caption background (a plain redraw of the strip).
  const int strip_w = 3 * 96 + 2 * 8, strip_y = 8 + 96;
  RgbImage expected{strip_w, kCaptionHeight, {}};
  expected.pixels.resize(static_cast<size_t>(strip_w) * kCaptionHeight * 3);
  for (size_t p = 0; p < expected.pixels.size(); p += 3)
    std::copy(o.caption_background.begin(), o.caption_background.end(), expected.pixels.begin() + p);
  const int ink = static_cast<int>(shown.size()) * 6 - 1;
  draw_text(expected.pixels.data(), strip_w, kCaptionHeight, (strip_w - ink) / 2, 3, shown, o.caption_colour);
  size_t mismatches = 0;
  for (int y = 0; y < kCaptionHeight; ++y)
    for (int x = 0; x < strip_w; ++x) mismatches += pixel(sheet, 8 + x, strip_y + y) != pixel(expected, x, y);
  CHECK(mismatches == 0);
  // Row 1: the gap between tiles 3 and 4 is inside the span, the gap
  // before tile 5 stays background, and tile 5 keeps its own strip.
  const int row1_y = 8 + (96 + kCaptionHeight + 8) + 96;
  CHECK(pixel(sheet, 8 + 96 + 4, row1_y) == o.caption_background);
  CHECK(pixel(sheet, 8 + 2 * 96 + 8 + 4, row1_y) == o.background);
  CHECK(pixel(sheet, 8 + 2 * (96 + 8) + 1, row1_y) == o.caption_background);
  // Without the option nothing spans (the image grid's behaviour).
  o.caption_spans_empty = false;
  CHECK(layout_contact_sheet(tiles, o).caption_width == std::vector<int>(6, 96));
}
