// The MP4 writer, checked by decoding its files with libavformat /
// libavcodec / libswscale (tests/mp4_decode.h, which reads them as BT.709
// limited range independently of the writer): frame count, rate and time
// stamps, the even (edge-padded) size, yuv420p, the BT.709 tags, the
// metadata, the pixels (PSNR against the input, and the luma of flat
// colours, which pins down the matrix and the range), crf, and the failure
// paths (no file and no temporary file left, messages naming the path).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <malloc.h>

#include "io/mp4_writer.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "mp4_decode.h"
#include "temp_dir.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::decode_mp4;

namespace {

// (F, 3, H, W): a smooth gradient with two coloured squares moving 2 pixels
// a frame. Their edges ramp over 4 pixels, as a decoded image's do: a hard
// edge between saturated colours loses ~10 dB in any 4:2:0 video at the
// player's chroma upsampling, whatever the encoder did, which would hide
// the writer's own error.
Tensor moving_squares(int frames, int h, int w) {
  Tensor t = Tensor::zeros({frames, 3, h, w});
  auto at = [&](int f, int c, int y, int x) -> float& {
    return t[((static_cast<int64_t>(f) * 3 + c) * h + y) * w + x];
  };
  // Coverage of the square [x0, x0 + 6) x [y0, y0 + 6) at pixel (x, y): 1
  // well inside, 0 well outside, a linear ramp 4 pixels wide across the edge.
  auto inside = [](int x, int y, int x0, int y0) {
    const float d = std::min({x + 0.5f - x0, x0 + 6 - x - 0.5f, y + 0.5f - y0, y0 + 6 - y - 0.5f});
    return std::clamp(0.5f + d / 4, 0.0f, 1.0f);
  };
  const float red[3] = {0.8f, 0.3f, 0.25f}, blue[3] = {0.25f, 0.35f, 0.75f};
  for (int f = 0; f < frames; ++f)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const float a = inside(x, y, 2 + 2 * f, 4), b = inside(x, y, 20 - 2 * f, 12);
        const float background[3] = {0.2f + 0.6f * x / w, 0.25f + 0.5f * y / h, 0.5f};
        for (int c = 0; c < 3; ++c)
          at(f, c, y, x) = (background[c] * (1 - a) + red[c] * a) * (1 - b) + blue[c] * b;
      }
  return t;
}

// One flat colour, `frames` frames.
Tensor flat(int frames, int h, int w, float r, float g, float b) {
  Tensor t = Tensor::zeros({frames, 3, h, w});
  const float rgb[3] = {r, g, b};
  for (int f = 0; f < frames; ++f)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < h * w; ++i) t[(static_cast<int64_t>(f) * 3 + c) * h * w + i] = rgb[c];
  return t;
}

OutputItem item(int index, Tensor frames) {
  OutputItem it;
  it.index = index;
  it.frames = std::move(frames);
  it.caption = "clip " + std::to_string(index);
  it.text = {{"parameters", "a red square\nSteps: 6, Sampler: ddim, Seed: " + std::to_string(index)},
             {"ditgen_config", R"({"output":{"format":"mp4"}})"}};
  return it;
}

// Frame f of `frames` as 8-bit RGB, as every writer converts it.
std::vector<uint8_t> input_rgb(const Tensor& frames, int f) { return output_frame_rgb(frames, f).pixels; }

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

// The PSNR of the worst frame of `path` against `frames` (cropped to the input size).
double worst_psnr(const std::string& path, const Tensor& frames) {
  const auto v = decode_mp4(path);
  const int h = static_cast<int>(frames.dim(2)), w = static_cast<int>(frames.dim(3));
  REQUIRE(v.rgb.size() == static_cast<size_t>(frames.dim(0)));
  double worst = INFINITY;
  for (size_t f = 0; f < v.rgb.size(); ++f)
    worst = std::min(worst, testing::psnr8(testing::crop_rgb(v.rgb[f], v.width, w, h),
                                           input_rgb(frames, static_cast<int>(f))));
  return worst;
}

std::string runtime_failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeFailure& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a RuntimeFailure: ") + e.what() + ">";
  }
  return "<no exception>";
}

// Real frames: the default video model's, as diffusers decoded them
// (tests/fixtures/latte_shapes_reference), video 0's top-left h x w.
Tensor real_frames(int h, int w) {
  const auto file = SafetensorsFile::open(std::string(DITGEN_SOURCE_DIR) +
                                          "/tests/fixtures/latte_shapes_reference/expected.safetensors");
  const Tensor all = file->load("frames");  // (2, 16, 3, 32, 32)
  const int64_t frames = all.dim(1), full_h = all.dim(3), full_w = all.dim(4);
  Tensor t = Tensor::zeros({frames, 3, h, w});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          t[((f * 3 + c) * h + y) * w + x] = all.data()[((f * 3 + c) * full_h + y) * full_w + x];
  return t;
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("mp4 writer: frames, rate, even size, yuv420p, BT.709 tags, metadata and pixels read back") {
  testing::TempDir dir("ditgen_test_mp4");
  const OutputPlan plan{dir.file("clip.png"), 2, 5, {}};
  auto writer = make_mp4_writer(plan, 8, 18);
  CHECK(writer->planned_paths() == std::vector<std::string>{dir.file("clip_0000.mp4"), dir.file("clip_0001.mp4")});

  // Output 0 has an even size; output 1 an odd one, padded to the same.
  const Tensor even = moving_squares(5, 22, 34), odd = moving_squares(5, 21, 33);
  CHECK(writer->write(item(0, even)) == std::vector<std::string>{dir.file("clip_0000.mp4")});
  CHECK(writer->write(item(1, odd)) == std::vector<std::string>{dir.file("clip_0001.mp4")});
  CHECK(writer->finish().empty());
  CHECK(listing(dir.path) == std::vector<std::string>{"clip_0000.mp4", "clip_0001.mp4"});  // no temporary left

  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    const Tensor& input = i == 0 ? even : odd;
    const auto v = decode_mp4(dir.file("clip_000" + std::to_string(i) + ".mp4"));
    CHECK(v.codec == "h264");
    CHECK(v.pix_fmt == "yuv420p");
    CHECK(v.width == 34);
    CHECK(v.height == 22);
    CHECK(v.primaries == AVCOL_PRI_BT709);
    CHECK(v.trc == AVCOL_TRC_BT709);
    CHECK(v.space == AVCOL_SPC_BT709);
    CHECK(v.range == AVCOL_RANGE_MPEG);
    CHECK(v.avg_frame_rate.num == 8);
    CHECK(v.avg_frame_rate.den == 1);
    CHECK(v.duration_s == doctest::Approx(5.0 / 8));
    REQUIRE(v.rgb.size() == 5);
    REQUIRE(v.pts.size() == 5);
    for (int f = 0; f < 5; ++f) CHECK(v.pts[f] * av_q2d(v.time_base) == doctest::Approx(f / 8.0));
    CHECK(v.metadata.at("comment") == "a red square\nSteps: 6, Sampler: ddim, Seed: " + std::to_string(i));
    CHECK(v.metadata.at("title") == "clip " + std::to_string(i));
    CHECK(v.metadata.at("description") == R"({"output":{"format":"mp4"}})");

    const int h = static_cast<int>(input.dim(2)), w = static_cast<int>(input.dim(3));
    for (int f = 0; f < 5; ++f) {
      const double psnr = testing::psnr8(testing::crop_rgb(v.rgb[f], v.width, w, h), input_rgb(input, f));
      MESSAGE("crf 18, " << w << "x" << h << ", frame " << f << ": PSNR " << psnr << " dB");
      CHECK(psnr > 35);
    }
    if (i == 1) {
      // The padding repeats the last column and row: in the decoded luma the
      // extra column / row equal their neighbours up to coding noise.
      const auto& y = v.luma[0];
      for (int r = 0; r < 21; ++r) CHECK(std::abs(int(y[r * 34 + 33]) - int(y[r * 34 + 32])) <= 3);
      for (int c = 0; c < 33; ++c) CHECK(std::abs(int(y[21 * 34 + c]) - int(y[20 * 34 + c])) <= 3);
    }
  }
}

// Issue 36: libswscale's SIMD reads went past the end of a tightly packed
// frame, so the video depended on whatever the heap held there. The same
// frames must give the same bytes whatever the heap around them: the
// second write runs after the heap is reshaped and every freed byte is
// overwritten (glibc's M_PERTURB). ctest also runs the mp4 writer cases
// under valgrind ("io: mp4 writer under valgrind", tests/CMakeLists.txt),
// which reports any read of memory the writer does not own or has not set.
TEST_CASE("mp4 writer: real frames give the same bytes whatever the heap holds around them") {
  testing::TempDir dir("ditgen_test_mp4_heap");
  const Tensor frames = real_frames(31, 29);  // odd: the even padding runs too
  const OutputPlan plan_a{dir.file("a.mp4"), 1, 16, {}}, plan_b{dir.file("b.mp4"), 1, 16, {}};
  make_mp4_writer(plan_a, 8, 18)->write(item(0, frames));

  mallopt(M_PERTURB, 0x5a);
  std::vector<std::vector<char>> clutter;
  for (int i = 0; i < 64; ++i) clutter.emplace_back(static_cast<size_t>(37 * i + 11), static_cast<char>(i));
  for (size_t i = 0; i < clutter.size(); i += 2) clutter[i] = {};
  make_mp4_writer(plan_b, 8, 18)->write(item(0, frames));
  mallopt(M_PERTURB, 0);

  const auto a = file_bytes(dir.file("a.mp4")), b = file_bytes(dir.file("b.mp4"));
  CHECK(a.size() > 1000);
  CHECK(a == b);
  CHECK(worst_psnr(dir.file("a.mp4"), frames) > 27);  // crf 18 on saturated 29x31 clips: 29.5 dB
}

TEST_CASE("mp4 writer: BT.709 matrix and limited range (luma of flat colours)") {
  // Y = 16 + 219 (0.2126 R + 0.7152 G + 0.0722 B): red 62.6 (BT.601 would
  // give 81.5, full range 54.2), green 172.6, blue 31.8, white 235, black 16.
  struct Case {
    float r, g, b;
    double luma;
  };
  const Case cases[] = {{1, 0, 0, 62.6}, {0, 1, 0, 172.6}, {0, 0, 1, 31.8}, {1, 1, 1, 235}, {0, 0, 0, 16}};
  testing::TempDir dir("ditgen_test_mp4");
  auto writer = make_mp4_writer({dir.file("flat.mp4"), 5, 1, {}}, 8, 18);
  for (int i = 0; i < 5; ++i) writer->write(item(i, flat(1, 16, 16, cases[i].r, cases[i].g, cases[i].b)));
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    const auto v = decode_mp4(dir.file("flat_000" + std::to_string(i) + ".mp4"));
    REQUIRE(v.luma.size() == 1);
    double mean = 0;
    for (uint8_t y : v.luma[0]) mean += y;
    mean /= double(v.luma[0].size());
    CAPTURE(mean);
    CHECK(std::abs(mean - cases[i].luma) < 1.5);
  }
}

TEST_CASE("mp4 writer: crf trades size for error, crf 51 still decodes") {
  testing::TempDir dir("ditgen_test_mp4");
  const Tensor input = moving_squares(5, 22, 34);
  make_mp4_writer({dir.file("q18.mp4"), 1, 5, {}}, 8, 18)->write(item(0, input));
  make_mp4_writer({dir.file("q51.mp4"), 1, 5, {}}, 8, 51)->write(item(0, input));
  make_mp4_writer({dir.file("q0.mp4"), 1, 5, {}}, 8, 0)->write(item(0, input));
  const double p18 = worst_psnr(dir.file("q18.mp4"), input), p51 = worst_psnr(dir.file("q51.mp4"), input),
               p0 = worst_psnr(dir.file("q0.mp4"), input);
  MESSAGE("worst-frame PSNR: crf 0 " << p0 << " dB, crf 18 " << p18 << " dB, crf 51 " << p51 << " dB");
  CHECK(p18 > 35);
  CHECK(p51 < p18 - 3);
  CHECK(p0 >= p18);  // lossless luma/chroma; what remains is the RGB <-> YUV rounding
  CHECK(fs::file_size(dir.file("q51.mp4")) < fs::file_size(dir.file("q18.mp4")));
}

TEST_CASE("mp4 writer: frame rates, and one-frame videos last one frame") {
  testing::TempDir dir("ditgen_test_mp4");
  SUBCASE("12.5 fps: 25/2") {
    make_mp4_writer({dir.file("a.mp4"), 1, 3, {}}, 12.5, 18)->write(item(0, moving_squares(3, 22, 34)));
    const auto v = decode_mp4(dir.file("a.mp4"));
    CHECK(v.avg_frame_rate.num == 25);
    CHECK(v.avg_frame_rate.den == 2);
    CHECK(v.rgb.size() == 3);
    CHECK(v.duration_s == doctest::Approx(3 / 12.5));
  }
  SUBCASE("23.976 fps: 2997/125") {
    make_mp4_writer({dir.file("b.mp4"), 1, 4, {}}, 23.976, 18)->write(item(0, moving_squares(4, 22, 34)));
    const auto v = decode_mp4(dir.file("b.mp4"));
    CHECK(av_cmp_q(v.avg_frame_rate, AVRational{2997, 125}) == 0);
    CHECK(v.duration_s == doctest::Approx(4 / 23.976));
  }
  SUBCASE("an image: one frame of 1/fps s") {
    make_mp4_writer({dir.file("c.mp4"), 1, 1, {}}, 8, 18)->write(item(0, moving_squares(1, 20, 20)));
    const auto v = decode_mp4(dir.file("c.mp4"));
    CHECK(v.rgb.size() == 1);
    CHECK(v.width == 20);
    CHECK(v.duration_s == doctest::Approx(1.0 / 8));
  }
}

TEST_CASE("mp4 writer: failures throw RuntimeFailure naming the file and leave nothing behind") {
  testing::TempDir dir("ditgen_test_mp4");
  std::ofstream(dir.file("plain")) << "x";

  SUBCASE("an unwritable path (its directory is a regular file)") {
    auto writer = make_mp4_writer({dir.file("plain/clip.mp4"), 1, 2, {}}, 8, 18);
    const std::string message = runtime_failure_of([&] { writer->write(item(0, moving_squares(2, 22, 34))); });
    INFO(message);
    CHECK(message.rfind(dir.file("plain/clip.mp4") + ": ", 0) == 0);
  }
  SUBCASE("libav refuses the frame: the libav error and x264's reason, an old file untouched") {
    std::ofstream(dir.file("wide.mp4")) << "previous";
    auto writer = make_mp4_writer({dir.file("wide.mp4"), 1, 1, {}}, 8, 18);
    // 20000 pixels wide: more than H.264 / x264 encode.
    const std::string message = runtime_failure_of([&] { writer->write(item(0, flat(1, 2, 20000, 0.5f, 0.5f, 0.5f))); });
    INFO(message);
    CHECK(message.rfind(dir.file("wide.mp4") + ": cannot open the libx264 encoder for 20000x2: ", 0) == 0);
    CHECK(contains(message, "Generic error in an external library"));  // av_strerror's text
    CHECK(contains(message, "invalid width x height (20000x2)"));       // libx264's log line
    std::ifstream in(dir.file("wide.mp4"));
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "previous");
    fs::remove(dir.file("wide.mp4"));
  }
  SUBCASE("no such encoder: at construction, before any output") {
    const std::string message =
        runtime_failure_of([&] { make_mp4_writer({dir.file("clip.mp4"), 1, 2, {}}, 8, 18, "no_such_encoder"); });
    INFO(message);
    CHECK(message.rfind(dir.file("clip.mp4") + ": ", 0) == 0);
    CHECK(contains(message, "'no_such_encoder' is not available"));
    CHECK(contains(message, "libx264"));
  }
  CHECK(listing(dir.path) == std::vector<std::string>{"plain"});
}

TEST_CASE("mp4 writer: argument checks") {
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, 8, 52), std::invalid_argument);
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, 8, -1), std::invalid_argument);
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, 0, 18), std::invalid_argument);
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, 1e-9, 18), std::invalid_argument);
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, 1001, 18), std::invalid_argument);
  CHECK_THROWS_AS(make_mp4_writer({"x.mp4", 1, 1, {}}, NAN, 18), std::invalid_argument);
  auto writer = make_mp4_writer({"x.mp4", 1, 1, {}}, 8, 18);
  CHECK_THROWS_AS(writer->write(item(1, flat(1, 4, 4, 0, 0, 0))), std::invalid_argument);  // index out of range
  OutputItem bad = item(0, Tensor::zeros({1, 4, 4, 4}));                                   // 4 channels
  CHECK_THROWS_AS(writer->write(bad), std::invalid_argument);
  CHECK_FALSE(fs::exists("x.mp4"));
}
