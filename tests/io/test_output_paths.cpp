// output_path_for, video_path_for and grid_path_for: numbering of several
// outputs, "{i}" patterns, paths without extension, dots in directory names.
#include <doctest/doctest.h>

#include "io/output_paths.h"

namespace ditgen::io {

TEST_CASE("one output keeps its path") {
  CHECK(output_path_for("out/dit.png", 0, 1) == "out/dit.png");
  CHECK(output_path_for("dit", 0, 1) == "dit");
}

TEST_CASE("one output with {i} gets index 0000") {
  CHECK(output_path_for("out/dit_{i}.png", 0, 1) == "out/dit_0000.png");
}

TEST_CASE("several outputs insert _NNNN before the extension") {
  CHECK(output_path_for("out/dit.png", 0, 4) == "out/dit_0000.png");
  CHECK(output_path_for("out/dit.png", 3, 4) == "out/dit_0003.png");
  CHECK(output_path_for("dit.png", 12, 20) == "dit_0012.png");
  CHECK(output_path_for("out/dit.v2.png", 1, 2) == "out/dit.v2_0001.png");
  CHECK(output_path_for("out/dit.png", 12345, 20000) == "out/dit_12345.png");
}

TEST_CASE("several outputs without extension append _NNNN") {
  CHECK(output_path_for("out/dit", 2, 3) == "out/dit_0002");
  CHECK(output_path_for("out.d/dit", 2, 3) == "out.d/dit_0002");  // the dot is in the directory
  CHECK(output_path_for("out/.hidden", 1, 2) == "out/.hidden_0001");
}

TEST_CASE("{i} is replaced by the zero-padded index, every occurrence") {
  CHECK(output_path_for("out/{i}/img_{i}.png", 7, 10) == "out/0007/img_0007.png");
  CHECK(output_path_for("frame{i}", 42, 100) == "frame0042");
}

TEST_CASE("grid path") {
  CHECK(grid_path_for("out/dit.png") == "out/dit_grid.png");
  CHECK(grid_path_for("out/dit") == "out/dit_grid.png");
  CHECK(grid_path_for("out/video.mp4") == "out/video_grid.png");
  CHECK(grid_path_for("out/img_{i}.png") == "out/img_grid.png");
  CHECK(grid_path_for("out.d/dit") == "out.d/dit_grid.png");
}

}  // namespace ditgen::io

namespace ditgen::io {

TEST_CASE("frames of a video go after the output index, as PNG") {
  CHECK(frame_path_for("out/clip.mp4", 1, 3, 7) == "out/clip_0001_f007.png");
  CHECK(frame_path_for("out/clip.png", 0, 1, 0) == "out/clip_f000.png");
  CHECK(frame_path_for("out/clip_{i}.png", 2, 4, 15) == "out/clip_0002_f015.png");
  CHECK(frame_path_for("clip", 0, 1, 123) == "clip_f123.png");
}

}  // namespace ditgen::io

namespace ditgen::io {

TEST_CASE("video paths: output_path_for with the extension .mp4") {
  CHECK(video_path_for("out/img.png", 1, 2) == "out/img_0001.mp4");
  CHECK(video_path_for("out/clip.mp4", 0, 1) == "out/clip.mp4");
  CHECK(video_path_for("out/clip", 0, 1) == "out/clip.mp4");
  CHECK(video_path_for("out.d/clip", 3, 4) == "out.d/clip_0003.mp4");
  CHECK(video_path_for("out/clip_{i}.v2.png", 5, 10) == "out/clip_0005.v2.mp4");
}

}  // namespace ditgen::io
