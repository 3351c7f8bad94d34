// Contact sheets: many small RGB8 images on one PNG, in a grid of equal
// cells, each with a caption strip underneath (dark bitmap-font text on a
// light band). Small tiles are enlarged by a whole factor with nearest
// neighbour so 32x32 samples stay crisp and visible; cells are as large as
// the largest enlarged tile, which sits centred in its cell. Captions that
// do not fit the cell are cut and end in "...", and are drawn through a
// canvas clipped to their own strip, so nothing spills into a neighbour.
// With caption_spans_empty (filmstrips: one caption per row, under its
// first frame) a caption's strip runs on under the tiles to its right in
// the same row that have no caption of their own, gaps included, so a
// prompt reads whole under its row instead of cut to one frame's width.
//
// Geometry (all in sheet pixels), for n tiles:
//   columns   = options.columns, or ceil(sqrt(n)) when 0; at most n
//   rows      = ceil(n / columns); tile k is at row k / columns, column k % columns
//   scale_k   = max(1, ceil(options.min_tile_width / width_k))
//   cell      = cell_width x (image_height + caption_height), where
//               cell_width = max_k width_k * scale_k, image_height = max_k height_k * scale_k,
//               caption_height = kGlyphHeight * font_scale + 2 * caption_margin
//   sheet     = columns * cell_width + (columns + 1) * padding wide,
//               rows * cell height + (rows + 1) * padding high
//   cell (r, c) top-left = (padding + c * (cell_width + padding), padding + r * (cell height + padding));
//   the tile's top-left is offset by ((cell_width - w * s) / 2, (image_height - h * s) / 2).
//   caption strip k = caption_width_k x caption_height at the cell's bottom-left, where
//               caption_width_k = cell_width, or with caption_spans_empty and a caption,
//               span * cell_width + (span - 1) * padding, span = 1 + the uncaptioned tiles
//               right after k in its row (those then have caption_width 0: no strip of their own)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/bitmap_font.h"
#include "io/png.h"
#include "io/rgb_image.h"

namespace ditgen::io {

struct Tile {
  RgbImage image;
  std::string caption;  // e.g. "red circle", "class 207"; one line, ASCII
};

struct ContactSheetOptions {
  int columns = 0;           // 0: ceil(sqrt(number of tiles))
  int min_tile_width = 128;  // narrower tiles are enlarged by a whole factor to at least this; 0: never
  int padding = 8;           // around the sheet and between cells
  int font_scale = 1;        // caption glyph cells are 5x8 (5x7 and a descender row) times this
  int caption_margin = 3;    // space around the caption text inside its strip
  Rgb background = {96, 96, 96};  // padding and the parts of a cell no tile covers
  Rgb caption_background = {240, 240, 240};
  Rgb caption_colour = {20, 20, 20};
  bool caption_spans_empty = false;  // a caption's strip covers the uncaptioned tiles after it in its row
};

// Where everything goes; see the geometry at the top of this file.
struct ContactSheetLayout {
  int columns = 0, rows = 0;
  int cell_width = 0, image_height = 0, caption_height = 0;
  int width = 0, height = 0;  // the whole sheet
  std::vector<int> tile_scale;  // per tile
  std::vector<int> tile_x, tile_y;  // per tile: top-left of the enlarged tile on the sheet
  std::vector<int> caption_x, caption_y;  // per tile: top-left of its caption strip
  std::vector<int> caption_width;         // per tile: its strip's width; 0 where a caption to the left covers it
};

// std::invalid_argument for no tiles, a tile whose pixel count is not
// width * height * 3 (or with a non-positive side), negative options or a
// font_scale < 1, and a sheet too large to encode as PNG.
ContactSheetLayout layout_contact_sheet(const std::vector<Tile>& tiles, const ContactSheetOptions& options = {});
RgbImage make_contact_sheet(const std::vector<Tile>& tiles, const ContactSheetOptions& options = {});

// The caption as drawn into a strip `available` pixels wide at `font_scale`:
// unchanged when its glyphs fit, else the longest prefix that fits followed
// by "..." (spaces at the cut dropped), else as many dots as fit (maybe none).
std::string fit_caption(const std::string& caption, int available, int font_scale = 1);

// An RgbImage as a PNG file, via write_png (atomic, with text chunks).
// std::invalid_argument if its pixel count is not width * height * 3.
void write_png(const std::string& path, const RgbImage& image, const PngText& text = {});

}  // namespace ditgen::io
