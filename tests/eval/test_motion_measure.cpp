// The clip measure of the default video model (src/eval/motion_measure.h)
// on clips drawn here: a disc or square on a grey background moving a known
// way, one case per motion, a still clip (no motion), an empty clip, and the
// boundary of the 4-pixel shift rule. The drawing is independent of the
// training set's (scripts/train/shapes_video_dataset.py), so the measure is
// checked against the geometry, not against itself.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "eval/motion_measure.h"

using ditgen::eval::classify_shape_clip;
using ditgen::eval::ClipGuess;

namespace {

constexpr int kFrames = 16, kSize = 32;

// Per frame f: a shape of half-size r(f) centred at (cx(f), cy(f)), in
// red (255, 30, 25) on grey (110, 110, 110). disc: Euclidean, else a square.
template <class Path>
std::vector<uint8_t> draw(bool disc, Path path) {
  std::vector<uint8_t> clip(kFrames * kSize * kSize * 3);
  for (int f = 0; f < kFrames; ++f) {
    const auto [cx, cy, r] = path(f);
    for (int y = 0; y < kSize; ++y)
      for (int x = 0; x < kSize; ++x) {
        const double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
        const bool in = disc ? dx * dx + dy * dy <= r * r : std::abs(dx) <= r && std::abs(dy) <= r;
        uint8_t* p = &clip[((f * kSize + y) * kSize + x) * 3];
        p[0] = in ? 255 : 110, p[1] = in ? 30 : 110, p[2] = in ? 25 : 110;
      }
  }
  return clip;
}

struct Pose {
  double cx, cy, r;
};

ClipGuess measure(const std::vector<uint8_t>& clip) { return classify_shape_clip(clip.data(), kFrames, kSize, kSize); }

}  // namespace

TEST_CASE("clip measure: each of the six motions of a red disc, and its colour and shape") {
  const double t = 12.0 / (kFrames - 1);  // 12 px over the clip
  const std::vector<std::pair<int, std::vector<uint8_t>>> cases = {
      {0, draw(true, [&](int f) { return Pose{22 - t * f, 12, 5}; })},   // moving left
      {1, draw(true, [&](int f) { return Pose{10 + t * f, 20, 5}; })},   // moving right
      {2, draw(true, [&](int f) { return Pose{16, 22 - t * f, 5}; })},   // moving up (y grows downwards)
      {3, draw(true, [&](int f) { return Pose{15, 10 + t * f, 5}; })},   // moving down
      {4, draw(true, [&](int f) { return Pose{16, 16, 4 + 0.5 * f}; })},   // growing
      {5, draw(true, [&](int f) { return Pose{16, 16, 11.5 - 0.5 * f}; })},  // shrinking
  };
  for (const auto& [motion, clip] : cases) {
    CAPTURE(motion);
    const ClipGuess g = measure(clip);
    CHECK(g.motion == motion);
    CHECK(g.colour == 0);  // red
    CHECK(g.shape == 0);   // circle
  }
}

TEST_CASE("clip measure: a still square has its shape and no motion, an empty clip has nothing") {
  const ClipGuess still = measure(draw(false, [](int) { return Pose{16, 16, 6}; }));
  CHECK(still.shape == 1);  // square
  CHECK(still.motion == -1);
  CHECK(still.shift_x == doctest::Approx(0));
  CHECK(still.area_ratio == doctest::Approx(1));
  const ClipGuess empty = measure(draw(true, [](int) { return Pose{-50, -50, 1}; }));
  CHECK(empty.colour == -1);
  CHECK(empty.motion == -1);
}

TEST_CASE("clip measure: a translation needs a 4-pixel centroid shift between the first and last 4 frames") {
  // Whole-pixel steps of a square: the first 4 frames at x = 10, the last 4
  // at 10 + shift, so the centroid moves exactly `shift` pixels.
  for (const int shift : {3, 4}) {
    CAPTURE(shift);
    const ClipGuess g = measure(draw(false, [&](int f) { return Pose{f < 8 ? 10.0 : 10.0 + shift, 16, 4}; }));
    CHECK(g.shift_x == doctest::Approx(shift));
    CHECK(g.motion == (shift >= 4 ? 1 : -1));
  }
}
