// A simple, explainable classifier for the coloured-shapes images of
// ditgen's default model (scripts/shapes_dataset.py): the quality measure of
// docs/design.md §7 ("does the output show the requested class?").
// Colour: the background is estimated as the per-channel median of the image
// border; pixels further than 0.3 (RGB in [0,1], Euclidean) from it are the
// foreground; its mean colour's hue picks the nearest of the six class hues.
// Shape: the foreground's bounding box is compared (IoU) with each shape's
// template drawn in that box; the best match wins. This is a C++ port of
// classify() in scripts/train_default.py, checked against it by a fixture.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ditgen::eval {

// Class vocabulary of the shapes set: id = colour_index * 5 + shape_index,
// name "<colour> <shape>".
const std::vector<std::string>& shape_colour_names();  // red yellow green cyan blue magenta
const std::vector<std::string>& shape_names();         // circle square triangle star cross

struct ShapeGuess {
  int colour = -1;  // index into shape_colour_names(), -1: no foreground found
  int shape = -1;   // index into shape_names(), -1: no foreground found
  int64_t foreground_pixels = 0;
  double shape_iou = 0;  // IoU of the best template
};

// The foreground rule above, shared with the clip measure (motion_measure.h)
// that applies it frame by frame. rgb: row-major [height, width, 3] uint8,
// height and width >= 1.
class Foreground {
 public:
  // The background: per channel the median of the border (rows 0 and H-1,
  // columns 0 and W-1; corners twice, as the Python concatenation does),
  // the two middle values averaged like numpy.median.
  Foreground(const uint8_t* rgb, int64_t height, int64_t width);
  // Channel c of pixel (y, x) in [0, 1].
  double value(int64_t y, int64_t x, int c) const { return rgb_[(y * width_ + x) * 3 + c] / 255.0; }
  // Whether pixel (y, x) lies further than 0.3 from the background.
  bool contains(int64_t y, int64_t x) const {
    double d2 = 0;
    for (int c = 0; c < 3; ++c) d2 += (value(y, x, c) - bg_[c]) * (value(y, x, c) - bg_[c]);
    return std::sqrt(d2) > kDistance;
  }

 private:
  static constexpr double kDistance = 0.3;
  const uint8_t* rgb_;
  int64_t width_;
  double bg_[3];
};

// rgb: row-major [height, width, 3] uint8.
ShapeGuess classify_shape_image(const uint8_t* rgb, int64_t height, int64_t width);

// Whether the template of `shape` covers point (u, v) of its unit bounding
// box ((0,0) top left); the same geometry as shape_mask_unit() in
// scripts/shapes_dataset.py.
bool shape_template_covers(int shape, double u, double v);

}  // namespace ditgen::eval
