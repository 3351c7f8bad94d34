// The layout is computed first, in 64-bit arithmetic, and checked against
// the PNG writer's size limit before any pixel is allocated; rendering then
// only copies bytes to places the layout vouches for. Enlargement repeats
// each source row's enlarged bytes instead of recomputing them per output
// row. Captions are drawn through an RgbCanvas that covers only their own
// strip, so even a caption the fitting got wrong could not reach another
// cell.
#include "io/contact_sheet.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace ditgen::io {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// encode_png refuses images above this many bytes; refuse them here, before
// rendering, with the sheet's own numbers in the message.
constexpr int64_t kMaxSheetBytes = std::numeric_limits<int>::max() / 2;

void check_inputs(const std::vector<Tile>& tiles, const ContactSheetOptions& o) {
  if (tiles.empty()) throw std::invalid_argument("contact sheet: no tiles");
  if (o.columns < 0 || o.min_tile_width < 0 || o.padding < 0 || o.caption_margin < 0 || o.font_scale < 1)
    throw std::invalid_argument("contact sheet: columns, min_tile_width, padding and caption_margin must be >= 0 "
                                "and font_scale >= 1");
  for (size_t k = 0; k < tiles.size(); ++k) {
    const RgbImage& im = tiles[k].image;
    if (im.width <= 0 || im.height <= 0 ||
        im.pixels.size() != static_cast<size_t>(im.width) * static_cast<size_t>(im.height) * 3)
      throw std::invalid_argument("contact sheet: tile " + std::to_string(k) + " is " + std::to_string(im.width) +
                                  "x" + std::to_string(im.height) + " with " + std::to_string(im.pixels.size()) +
                                  " bytes; expected positive sides and width * height * 3 bytes");
  }
}

// ceil(sqrt(n)) without trusting floating point at perfect squares.
int64_t ceil_sqrt(int64_t n) {
  auto r = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (r * r < n) ++r;
  while (r > 1 && (r - 1) * (r - 1) >= n) --r;
  return r;
}

void fill(RgbImage& im, int x0, int y0, int w, int h, Rgb colour) {
  for (int y = y0; y < y0 + h; ++y)
    for (int x = x0; x < x0 + w; ++x)
      std::copy(colour.begin(), colour.end(), im.pixels.begin() + (static_cast<size_t>(y) * im.width + x) * 3);
}

// Nearest-neighbour enlargement of `src` by `scale`, top-left at (x0, y0).
void blit_enlarged(RgbImage& sheet, const RgbImage& src, int scale, int x0, int y0) {
  const size_t out_row_bytes = static_cast<size_t>(src.width) * scale * 3;
  std::vector<uint8_t> row(out_row_bytes);
  for (int sy = 0; sy < src.height; ++sy) {
    const uint8_t* in = src.pixels.data() + static_cast<size_t>(sy) * src.width * 3;
    for (int sx = 0; sx < src.width; ++sx)
      for (int r = 0; r < scale; ++r)
        std::memcpy(row.data() + (static_cast<size_t>(sx) * scale + r) * 3, in + static_cast<size_t>(sx) * 3, 3);
    for (int r = 0; r < scale; ++r) {
      const size_t y = static_cast<size_t>(y0) + static_cast<size_t>(sy) * scale + r;
      std::memcpy(sheet.pixels.data() + (y * sheet.width + x0) * 3, row.data(), out_row_bytes);
    }
  }
}

}  // namespace

std::string fit_caption(const std::string& caption, int available, int font_scale) {
  if (font_scale < 1) throw std::invalid_argument("fit_caption: font_scale must be >= 1");
  // n glyphs need (n * advance - 1) * scale pixels: the blank column after the last one is not needed.
  const int64_t max_glyphs = available < 0 ? 0 : (available / font_scale + 1) / kGlyphAdvance;
  if (static_cast<int64_t>(caption.size()) <= max_glyphs) return caption;
  const std::string ellipsis = "...";
  if (max_glyphs < static_cast<int64_t>(ellipsis.size())) return std::string(static_cast<size_t>(max_glyphs), '.');
  std::string cut = caption.substr(0, static_cast<size_t>(max_glyphs) - ellipsis.size());
  while (!cut.empty() && cut.back() == ' ') cut.pop_back();  // "red ..." reads worse than "red..."
  return cut + ellipsis;
}

ContactSheetLayout layout_contact_sheet(const std::vector<Tile>& tiles, const ContactSheetOptions& o) {
  check_inputs(tiles, o);
  const auto n = static_cast<int64_t>(tiles.size());
  const int64_t columns = std::min<int64_t>(o.columns > 0 ? o.columns : ceil_sqrt(n), n);
  const int64_t rows = ceil_div(n, columns);

  std::vector<int> scale(tiles.size());
  int64_t cell_width = 0, image_height = 0;
  for (size_t k = 0; k < tiles.size(); ++k) {
    const RgbImage& im = tiles[k].image;
    const int64_t s = std::max<int64_t>(1, ceil_div(o.min_tile_width, im.width));
    scale[k] = static_cast<int>(s);  // s <= min_tile_width, an int
    cell_width = std::max(cell_width, im.width * s);
    image_height = std::max(image_height, im.height * s);
  }
  const int64_t caption_height = int64_t{kGlyphHeight} * o.font_scale + 2 * int64_t{o.caption_margin};
  const int64_t cell_height = image_height + caption_height;
  const int64_t width = columns * cell_width + (columns + 1) * int64_t{o.padding};
  const int64_t height = rows * cell_height + (rows + 1) * int64_t{o.padding};
  // Sides are below 2^60 (columns <= tiles in memory, cell sides < 2^32), and
  // the product is only formed once both sides are known to be below 2^30.
  if (width > kMaxSheetBytes || height > kMaxSheetBytes || width * height * 3 > kMaxSheetBytes)
    throw std::invalid_argument("contact sheet: " + std::to_string(width) + "x" + std::to_string(height) +
                                " pixels is too large for a PNG");

  ContactSheetLayout L;
  L.columns = static_cast<int>(columns), L.rows = static_cast<int>(rows);
  L.cell_width = static_cast<int>(cell_width), L.image_height = static_cast<int>(image_height);
  L.caption_height = static_cast<int>(caption_height);
  L.width = static_cast<int>(width), L.height = static_cast<int>(height);
  L.tile_scale = scale;
  for (size_t k = 0; k < tiles.size(); ++k) {
    const int cell_x = o.padding + static_cast<int>(k % columns) * (L.cell_width + o.padding);
    const int cell_y = o.padding + static_cast<int>(k / columns) * (static_cast<int>(cell_height) + o.padding);
    L.tile_x.push_back(cell_x + (L.cell_width - tiles[k].image.width * scale[k]) / 2);
    L.tile_y.push_back(cell_y + (L.image_height - tiles[k].image.height * scale[k]) / 2);
    L.caption_x.push_back(cell_x);
    L.caption_y.push_back(cell_y + L.image_height);
    L.caption_width.push_back(L.cell_width);
  }
  if (o.caption_spans_empty) {
    // Sides stay below the sheet's width, already checked above.
    for (size_t k = 0; k < tiles.size(); ++k) {
      if (tiles[k].caption.empty()) continue;  // a captioned tile is never covered by another
      for (size_t j = k + 1; j < tiles.size() && j / columns == k / columns && tiles[j].caption.empty(); ++j) {
        L.caption_width[k] += o.padding + L.cell_width;
        L.caption_width[j] = 0;
      }
    }
  }
  return L;
}

RgbImage make_contact_sheet(const std::vector<Tile>& tiles, const ContactSheetOptions& o) {
  const ContactSheetLayout L = layout_contact_sheet(tiles, o);
  RgbImage sheet{L.width, L.height, std::vector<uint8_t>(static_cast<size_t>(L.width) * L.height * 3)};
  fill(sheet, 0, 0, L.width, L.height, o.background);
  for (size_t k = 0; k < tiles.size(); ++k) {
    blit_enlarged(sheet, tiles[k].image, L.tile_scale[k], L.tile_x[k], L.tile_y[k]);
    const int strip_width = L.caption_width[k];
    if (strip_width == 0) continue;  // drawn as part of a caption to its left
    fill(sheet, L.caption_x[k], L.caption_y[k], strip_width, L.caption_height, o.caption_background);
    const std::string text = fit_caption(tiles[k].caption, strip_width - 2 * o.caption_margin, o.font_scale);
    const int ink = text.empty() ? 0 : text_width(text, o.font_scale) - o.font_scale;
    const RgbCanvas strip{sheet.pixels.data() + (static_cast<size_t>(L.caption_y[k]) * L.width + L.caption_x[k]) * 3,
                          strip_width, L.caption_height, static_cast<std::ptrdiff_t>(L.width) * 3};
    draw_text(strip, (strip_width - ink) / 2, o.caption_margin, text, o.caption_colour, o.font_scale);
  }
  return sheet;
}

void write_png(const std::string& path, const RgbImage& image, const PngText& text) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3)
    throw std::invalid_argument("write_png: RgbImage of " + std::to_string(image.width) + "x" +
                                std::to_string(image.height) + " has " + std::to_string(image.pixels.size()) +
                                " bytes, expected width * height * 3");
  write_png(path, image.pixels.data(), image.width, image.height, 3, text);
}

}  // namespace ditgen::io
