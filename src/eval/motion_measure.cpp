// Port of scripts/video_quality.py; see motion_measure.h. Each frame's
// foreground is the shape classifier's (Foreground, shape_classifier.h);
// frames without foreground are left out of the centroid means as
// numpy.nanmean does.
#include "eval/motion_measure.h"

#include <algorithm>
#include <cmath>

#include "eval/shape_classifier.h"

namespace ditgen::eval {
namespace {

constexpr int64_t kEdgeFrames = 4;
constexpr double kMinShiftPixels = 4.0;
constexpr double kAreaRatio = 1.5;

struct FrameForeground {
  int64_t pixels = 0;
  double cx = 0, cy = 0;  // centroid; meaningless when pixels == 0
};

FrameForeground foreground_of(const uint8_t* rgb, int64_t height, int64_t width) {
  const Foreground fg(rgb, height, width);
  FrameForeground f;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      if (!fg.contains(y, x)) continue;
      ++f.pixels;
      f.cx += static_cast<double>(x), f.cy += static_cast<double>(y);
    }
  if (f.pixels > 0) f.cx /= static_cast<double>(f.pixels), f.cy /= static_cast<double>(f.pixels);
  return f;
}

struct EdgeMeans {
  bool any = false;  // some frame of the range has foreground
  double cx = 0, cy = 0, area = 0;
};

EdgeMeans edge_means(const std::vector<FrameForeground>& fg, int64_t begin, int64_t end) {
  EdgeMeans m;
  int64_t with = 0;
  for (int64_t i = begin; i < end; ++i) {
    m.area += static_cast<double>(fg[i].pixels);
    if (fg[i].pixels == 0) continue;
    ++with, m.cx += fg[i].cx, m.cy += fg[i].cy;
  }
  m.area /= static_cast<double>(end - begin);
  if (with > 0) m.any = true, m.cx /= static_cast<double>(with), m.cy /= static_cast<double>(with);
  return m;
}

}  // namespace

const std::vector<std::string>& motion_names() {
  static const std::vector<std::string> names = {"moving left", "moving right", "moving up",
                                                 "moving down", "growing",      "shrinking"};
  return names;
}

ClipGuess classify_shape_clip(const uint8_t* clip, int64_t frames, int64_t height, int64_t width) {
  ClipGuess guess;
  if (frames < 1 || height < 2 || width < 2) return guess;
  const int64_t frame_bytes = height * width * 3;
  std::vector<FrameForeground> fg;
  int64_t largest = 0;
  for (int64_t f = 0; f < frames; ++f) {
    fg.push_back(foreground_of(clip + f * frame_bytes, height, width));
    if (fg[f].pixels > fg[largest].pixels) largest = f;  // first maximum, as numpy.argmax
  }
  const ShapeGuess s = classify_shape_image(clip + largest * frame_bytes, height, width);
  guess.colour = s.colour, guess.shape = s.shape;

  const int64_t e = std::min(kEdgeFrames, frames);
  const EdgeMeans first = edge_means(fg, 0, e), last = edge_means(fg, frames - e, frames);
  if (!first.any || !last.any) return guess;
  guess.shift_x = last.cx - first.cx, guess.shift_y = last.cy - first.cy;
  guess.area_ratio = last.area / std::max(1.0, first.area);
  if (std::max(std::abs(guess.shift_x), std::abs(guess.shift_y)) >= kMinShiftPixels) {
    if (std::abs(guess.shift_x) >= std::abs(guess.shift_y)) guess.motion = guess.shift_x > 0 ? 1 : 0;
    else guess.motion = guess.shift_y > 0 ? 3 : 2;
  } else if (guess.area_ratio > kAreaRatio) {
    guess.motion = 4;
  } else if (guess.area_ratio < 1 / kAreaRatio) {
    guess.motion = 5;
  }
  return guess;
}

}  // namespace ditgen::eval
