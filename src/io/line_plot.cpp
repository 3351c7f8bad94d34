#include "io/line_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/png.h"

namespace ditgen::io {

namespace {

// 3x5 glyphs for the characters tick labels need, one row per 3-bit value.
const char* glyph(char c) {
  switch (c) {
    case '0': return "\7\5\5\5\7";
    case '1': return "\2\6\2\2\7";
    case '2': return "\7\1\7\4\7";
    case '3': return "\7\1\7\1\7";
    case '4': return "\5\5\7\1\1";
    case '5': return "\7\4\7\1\7";
    case '6': return "\7\4\7\5\7";
    case '7': return "\7\1\1\1\1";
    case '8': return "\7\5\7\5\7";
    case '9': return "\7\5\7\1\7";
    case '.': return "\0\0\0\0\2";
    case '-': return "\0\0\7\0\0";
    case 'e': return "\0\7\7\4\7";
    default: return "\0\0\0\0\0";
  }
}

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
  void text(int x, int y, const std::string& s, int scale = 2) {
    for (char ch : s) {
      const char* g = glyph(ch);
      for (int r = 0; r < 5; ++r)
        for (int col = 0; col < 3; ++col)
          if (g[r] & (4 >> col))
            for (int a = 0; a < scale; ++a)
              for (int b = 0; b < scale; ++b) set(x + col * scale + a, y + r * scale + b, {0, 0, 0});
      x += 4 * scale;
    }
  }
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
    cv.text(4, py(y) - 5, tick_text(y));
  }
  for (int i = 0; i <= 5; ++i) {  // x ticks
    const double x = x_min + (x_max - x_min) * i / 5;
    cv.line(px(x), bottom, px(x), bottom + 5, {0, 0, 0});
    cv.text(px(x) - 8, bottom + 10, tick_text(std::round(x)));
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
