// The quality measure of ditgen's default video model (samples/latte-shapes,
// scripts/shapes_video_dataset.py): does a clip show the caption's colour,
// shape and motion? A C++ port of scripts/video_quality.py.
// Foreground per frame: pixels further than 0.3 (RGB in [0,1], Euclidean)
// from the median colour of that frame's border (the shape classifier's
// rule). Motion: the foreground's centroid and area, averaged over the first
// and over the last 4 frames. A centroid shift of >= 4 px is a translation
// named by its larger axis and sign (+x right, +y down); otherwise an area
// ratio last/first > 1.5 is "growing", < 1/1.5 "shrinking"; else none.
// Colour and shape: classify_shape_image() on the frame with the most
// foreground (any frame of a translation, the largest of a growth).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ditgen::eval {

// "moving left", "moving right", "moving up", "moving down", "growing",
// "shrinking": the motions of the video set's captions, in its order.
const std::vector<std::string>& motion_names();

struct ClipGuess {
  int colour = -1;  // index into shape_colour_names(), -1: no foreground
  int shape = -1;   // index into shape_names()
  int motion = -1;  // index into motion_names(), -1: none recognised
  double shift_x = 0, shift_y = 0;  // centroid path, last frames minus first, pixels
  double area_ratio = 0;            // foreground area, last frames over first
};

// clip: frames x [height, width, 3] uint8, row-major, contiguous.
ClipGuess classify_shape_clip(const uint8_t* clip, int64_t frames, int64_t height, int64_t width);

}  // namespace ditgen::eval
