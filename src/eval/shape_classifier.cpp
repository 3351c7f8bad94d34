// Port of classify() from scripts/train_default.py; see shape_classifier.h.
// Ties resolve as in the Python (first colour / first shape wins), and the
// border median (Foreground, shared with motion_measure.cpp) averages the
// two middle values like numpy.median.
#include "eval/shape_classifier.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace ditgen::eval {
namespace {

constexpr double kStarInner = 0.5;  // STAR_INNER in shapes_dataset.py
constexpr double kCrossArm = 0.36;  // CROSS_ARM
constexpr std::array<double, 6> kColourHues = {0, 60, 120, 180, 240, 300};

struct Point {
  double x, y;
};

// The 5-pointed star normalised to its own bounding box (first point up).
std::array<Point, 10> make_star() {
  std::array<Point, 10> pts{};
  double lo_x = 1e9, lo_y = 1e9, hi_x = -1e9, hi_y = -1e9;
  for (int i = 0; i < 10; ++i) {
    const double r = i % 2 == 0 ? 1.0 : kStarInner;
    const double a = std::numbers::pi / 2 + i * std::numbers::pi / 5;
    pts[i] = {r * std::cos(a), -r * std::sin(a)};
    lo_x = std::min(lo_x, pts[i].x), hi_x = std::max(hi_x, pts[i].x);
    lo_y = std::min(lo_y, pts[i].y), hi_y = std::max(hi_y, pts[i].y);
  }
  for (auto& p : pts) p = {(p.x - lo_x) / (hi_x - lo_x), (p.y - lo_y) / (hi_y - lo_y)};
  return pts;
}

template <size_t N>
bool in_polygon(double x, double y, const std::array<Point, N>& poly) {  // even-odd rule
  bool inside = false;
  for (size_t i = 0; i < N; ++i) {
    const Point a = poly[i], b = poly[(i + 1) % N];
    if ((a.y > y) != (b.y > y) && x < a.x + (y - a.y) * (b.x - a.x) / (b.y - a.y)) inside = !inside;
  }
  return inside;
}

double hue_degrees(double r, double g, double b) {
  const double mx = std::max({r, g, b}), mn = std::min({r, g, b}), c = mx - mn;
  if (mx == r) return 60 * std::fmod(std::fmod((g - b) / c, 6.0) + 6.0, 6.0);  // Python's % is non-negative
  if (mx == g) return 60 * ((b - r) / c + 2);
  return 60 * ((r - g) / c + 4);
}

}  // namespace

const std::vector<std::string>& shape_colour_names() {
  static const std::vector<std::string> names = {"red", "yellow", "green", "cyan", "blue", "magenta"};
  return names;
}

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> names = {"circle", "square", "triangle", "star", "cross"};
  return names;
}

bool shape_template_covers(int shape, double u, double v) {
  static const std::array<Point, 10> star = make_star();
  static const std::array<Point, 3> triangle = {{{0.5, 0.0}, {1.0, 1.0}, {0.0, 1.0}}};
  const bool in_box = u >= 0 && u <= 1 && v >= 0 && v <= 1;
  switch (shape) {
    case 0: return (u - 0.5) * (u - 0.5) + (v - 0.5) * (v - 0.5) <= 0.25;
    case 1: return in_box;
    case 2: return in_polygon(u, v, triangle);
    case 3: return in_polygon(u, v, star);
    case 4: {
      const double lo = 0.5 - kCrossArm / 2, hi = 0.5 + kCrossArm / 2;
      return in_box && ((u >= lo && u <= hi) || (v >= lo && v <= hi));
    }
    default: return false;
  }
}

Foreground::Foreground(const uint8_t* rgb, int64_t height, int64_t width) : rgb_(rgb), width_(width) {
  for (int c = 0; c < 3; ++c) {
    std::vector<double> border;
    for (int64_t x = 0; x < width; ++x) border.push_back(value(0, x, c)), border.push_back(value(height - 1, x, c));
    for (int64_t y = 0; y < height; ++y) border.push_back(value(y, 0, c)), border.push_back(value(y, width - 1, c));
    std::sort(border.begin(), border.end());
    const size_t n = border.size();
    bg_[c] = n % 2 ? border[n / 2] : 0.5 * (border[n / 2 - 1] + border[n / 2]);
  }
}

ShapeGuess classify_shape_image(const uint8_t* rgb, int64_t height, int64_t width) {
  ShapeGuess guess;
  if (height < 2 || width < 2) return guess;
  const Foreground fg(rgb, height, width);

  std::vector<uint8_t> mask(static_cast<size_t>(height * width));
  double sum[3] = {0, 0, 0};
  int64_t y0 = height, y1 = -1, x0 = width, x1 = -1;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      if (!fg.contains(y, x)) continue;
      mask[y * width + x] = 1;
      ++guess.foreground_pixels;
      for (int c = 0; c < 3; ++c) sum[c] += fg.value(y, x, c);
      y0 = std::min(y0, y), y1 = std::max(y1, y), x0 = std::min(x0, x), x1 = std::max(x1, x);
    }
  if (guess.foreground_pixels < 4) return guess;
  const double r = sum[0] / guess.foreground_pixels, g = sum[1] / guess.foreground_pixels,
               b = sum[2] / guess.foreground_pixels;
  if (std::max({r, g, b}) - std::min({r, g, b}) < 1e-3) return guess;  // grey: no hue

  const double hue = hue_degrees(r, g, b);
  double best_distance = 1e9;
  for (size_t i = 0; i < kColourHues.size(); ++i) {
    const double d = std::abs(hue - kColourHues[i]), circular = std::min(d, 360 - d);
    if (circular < best_distance) best_distance = circular, guess.colour = static_cast<int>(i);
  }

  // Shape: IoU of the foreground inside its bounding box with each template
  // sampled at the pixel centres of that box.
  const int64_t h = y1 - y0 + 1, w = x1 - x0 + 1;
  double best_iou = -1;
  for (int s = 0; s < static_cast<int>(shape_names().size()); ++s) {
    int64_t both = 0, either = 0;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const bool t = shape_template_covers(s, (x + 0.5) / w, (y + 0.5) / h);
        const bool m = mask[(y0 + y) * width + x0 + x] != 0;
        both += t && m;
        either += t || m;
      }
    const double iou = static_cast<double>(both) / static_cast<double>(std::max<int64_t>(1, either));
    if (iou > best_iou) best_iou = iou, guess.shape = s;
  }
  guess.shape_iou = best_iou;
  return guess;
}

}  // namespace ditgen::eval
