// Tick labels use the shared 5x7 bitmap font (io/bitmap_font.h), which
// clips to the image, so labels near an edge need no special casing.
#include "io/line_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/bitmap_font.h"
#include "io/png.h"

namespace ditgen::io {

namespace {

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;
  Canvas(int w_, int h_) : w(w_), h(h_), px(static_cast<size_t>(w_) * h_ * 3, 255) {}
  void set(int x, int y, std::array<uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    std::copy(c.begin(), c.end(), px.begin() + (static_cast<size_t>(y) * w + x) * 3);
  }
  void line(int x0, int y0, int x1, int y1, std::array<uint8_t, 3> c, int thick = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {  // Bresenham
      for (int t = 0; t < thick; ++t) set(x0, y0 + t, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void text(int x, int y, const std::string& s) { draw_text(px.data(), w, h, x, y, s, {0, 0, 0}); }
};

std::string tick_text(double v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

void write_line_plot(const std::string& path, const std::vector<PlotSeries>& series, int width, int height,
                     const std::vector<std::pair<std::string, std::string>>& text) {
  Canvas cv(width, height);
  const int left = 60, right = width - 20, top = 30, bottom = height - 40;
  double x_min = 0, x_max = 1, y_max = 0;
  bool first = true;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (first) x_min = x_max = x, first = false;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      if (std::isfinite(y)) y_max = std::max(y_max, y);
    }
  if (x_max <= x_min) x_max = x_min + 1;
  if (y_max <= 0) y_max = 1;
  auto px = [&](double x) { return left + static_cast<int>(std::lround((x - x_min) / (x_max - x_min) * (right - left))); };
  auto py = [&](double y) { return bottom - static_cast<int>(std::lround(y / y_max * (bottom - top))); };
  for (int i = 0; i <= 4; ++i) {  // grid and y ticks
    const double y = y_max * i / 4;
    cv.line(left, py(y), right, py(y), {225, 225, 225});
    cv.text(4, py(y) - (kGlyphHeight - 1) / 2, tick_text(y));  // the 7 rows above the baseline centred on the line
  }
  for (int i = 0; i <= 5; ++i) {  // x ticks
    const double x = x_min + (x_max - x_min) * i / 5;
    cv.line(px(x), bottom, px(x), bottom + 5, {0, 0, 0});
    const std::string label = tick_text(std::round(x));
    cv.text(px(x) - text_width(label) / 2, bottom + 10, label);
  }
  cv.line(left, top, left, bottom, {0, 0, 0});
  cv.line(left, bottom, right, bottom, {0, 0, 0});
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    for (size_t i = 1; i < s.points.size(); ++i)
      cv.line(px(s.points[i - 1].first), py(s.points[i - 1].second), px(s.points[i].first), py(s.points[i].second),
              s.rgb, 2);
    for (int a = 0; a < 12; ++a)  // legend swatch, top right, in series order
      for (int b = 0; b < 12; ++b) cv.set(right - 20 * static_cast<int>(series.size() - k) + a, 8 + b, s.rgb);
  }
  write_png(path, cv.px.data(), width, height, 3, text);
}

}  // namespace ditgen::io
