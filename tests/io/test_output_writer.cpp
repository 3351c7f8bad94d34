// The output writers: which files each writes for which output and frame
// (pixels read back with stb_image and compared with the colour each frame
// was filled with), their metadata, the filmstrip frame choice against
// hand-worked indices, the contact sheet's shape for images and videos, and
// the argument checks.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/output_writer.h"
#include "temp_dir.h"

#include "stb_image_read.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;

namespace {

// Frames (F, 3, H, W) where frame f is one flat colour: value (output*F + f + 1) / 64 in channel 0.
Tensor flat_frames(int output, int frames, int h, int w) {
  Tensor t = Tensor::zeros({frames, 3, h, w});
  for (int f = 0; f < frames; ++f)
    for (int i = 0; i < h * w; ++i) t[static_cast<int64_t>(f) * 3 * h * w + i] = (output * frames + f + 1) / 64.0f;
  return t;
}

// The red byte of every pixel of a PNG file, and its size.
std::vector<int> red_bytes(const std::string& path, int* w, int* h) {
  int n = 0;
  unsigned char* px = stbi_load(path.c_str(), w, h, &n, 3);
  REQUIRE(px != nullptr);
  std::vector<int> red;
  for (int i = 0; i < *w * *h; ++i) red.push_back(px[3 * i]);
  stbi_image_free(px);
  return red;
}

int expected_red(int output, int frames, int f) { return static_cast<int>((output * frames + f + 1) / 64.0 * 255 + 0.5); }

OutputItem item(int index, int frames, int h = 5, int w = 7) {
  OutputItem it;
  it.index = index;
  it.frames = flat_frames(index, frames, h, w);
  it.caption = "output " + std::to_string(index);
  it.text = {{"parameters", it.caption}};
  return it;
}

}  // namespace

TEST_CASE("png writer: one file per image at output_path_for, pixels and size as given") {
  testing::TempDir dir("ditgen_test_writer");
  const OutputPlan plan{dir.file("img.png"), 3, 1, {}};
  auto writer = make_png_writer(plan);
  CHECK(writer->planned_paths() ==
        std::vector<std::string>{dir.file("img_0000.png"), dir.file("img_0001.png"), dir.file("img_0002.png")});
  for (int i = 0; i < 3; ++i) CHECK(writer->write(item(i, 1)) == std::vector<std::string>{dir.file("img_000" + std::to_string(i) + ".png")});
  CHECK(writer->finish().empty());
  for (int i = 0; i < 3; ++i) {
    int w = 0, h = 0;
    const auto red = red_bytes(dir.file("img_000" + std::to_string(i) + ".png"), &w, &h);
    CHECK(w == 7);
    CHECK(h == 5);
    for (int r : red) CHECK(r == expected_red(i, 1, 0));
  }
  // A video given to the image writer is an error, not a silently dropped frame.
  CHECK_THROWS_AS(writer->write(item(0, 2)), std::invalid_argument);
  CHECK_THROWS_AS(writer->write(item(3, 1)), std::invalid_argument);  // index out of range
}

TEST_CASE("png frames writer: frame f of output i at frame_path_for, in order") {
  testing::TempDir dir("ditgen_test_writer");
  const OutputPlan plan{dir.file("clip.png"), 2, 3, {}};
  auto writer = make_png_frames_writer(plan);
  CHECK(writer->planned_paths().size() == 6);
  CHECK(writer->planned_paths()[4] == dir.file("clip_0001_f001.png"));
  for (int i = 0; i < 2; ++i) {
    const auto written = writer->write(item(i, 3));
    REQUIRE(written.size() == 3);
    for (int f = 0; f < 3; ++f) {
      CHECK(written[f] == dir.file("clip_000" + std::to_string(i) + "_f00" + std::to_string(f) + ".png"));
      int w = 0, h = 0;
      for (int r : red_bytes(written[f], &w, &h)) CHECK(r == expected_red(i, 3, f));
    }
  }
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 6);  // nothing else: no temporary files left
}

TEST_CASE("filmstrip frames: evenly spaced, first and last included") {
  CHECK(filmstrip_frames(16, 8) == std::vector<int>{0, 2, 4, 6, 9, 11, 13, 15});
  CHECK(filmstrip_frames(5, 5) == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(filmstrip_frames(9, 3) == std::vector<int>{0, 4, 8});
  CHECK(filmstrip_frames(7, 1) == std::vector<int>{0});
  CHECK_THROWS_AS(filmstrip_frames(3, 4), std::invalid_argument);
}

TEST_CASE("contact sheet writer: a grid of images, or one filmstrip row per video") {
  testing::TempDir dir("ditgen_test_writer");
  {  // 6 images: grid_columns(6) = 2 columns (3 full rows)
    auto sheet = make_contact_sheet_writer({dir.file("a.png"), 6, 1, {}}, {{"ditgen_config", "{}"}});
    CHECK(sheet->planned_paths() == std::vector<std::string>{dir.file("a_grid.png")});
    std::vector<Tile> tiles;
    for (int i = 0; i < 6; ++i) {
      CHECK(sheet->write(item(i, 1)).empty());
      tiles.push_back({RgbImage{7, 5, std::vector<uint8_t>(7 * 5 * 3)}, "output " + std::to_string(i)});
    }
    CHECK(sheet->finish() == std::vector<std::string>{dir.file("a_grid.png")});
    ContactSheetOptions o;
    o.columns = 2;
    const auto layout = layout_contact_sheet(tiles, o);
    CHECK(layout.rows == 3);
    int w = 0, h = 0;
    red_bytes(dir.file("a_grid.png"), &w, &h);
    CHECK(w == layout.width);
    CHECK(h == layout.height);
  }
  {  // 2 videos of 12 frames with strips of 4: 2 rows of 4 cells
    auto sheet = make_contact_sheet_writer({dir.file("v.png"), 2, 12, {}}, {}, 4);
    for (int i = 0; i < 2; ++i) sheet->write(item(i, 12));
    sheet->finish();
    std::vector<Tile> tiles(8, Tile{RgbImage{7, 5, std::vector<uint8_t>(7 * 5 * 3)}, "x"});
    ContactSheetOptions o;
    o.columns = 4;
    const auto layout = layout_contact_sheet(tiles, o);
    int w = 0, h = 0;
    const auto red = red_bytes(dir.file("v_grid.png"), &w, &h);
    CHECK(w == layout.width);
    CHECK(h == layout.height);
    // Row 1, cell 3 shows frame 11 of video 1 (filmstrip_frames(12, 4) = 0, 4, 7, 11).
    const int x = layout.tile_x[7] + 1, y = layout.tile_y[7] + 1;
    CHECK(red[static_cast<size_t>(y) * w + x] == expected_red(1, 12, 11));
  }
  CHECK_THROWS_AS(make_contact_sheet_writer({dir.file("z.png"), 1, 1, {}}, {}, 0), std::invalid_argument);
}

TEST_CASE("grid columns: full rows near a square") {
  CHECK(grid_columns(1) == 1);
  CHECK(grid_columns(4) == 4);
  CHECK(grid_columns(30) == 5);
  CHECK(grid_columns(6) == 2);  // 2.45: 2 is nearer than 3
  CHECK(grid_columns(7) == 0);  // a prime: ceil(sqrt) columns
}
