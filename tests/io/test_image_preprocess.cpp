// The two image-to-video preprocessors against the Python classes' own
// outputs (tests/fixtures/images, scripts/fixtures/make_image_fixtures.py):
// diffusers' VideoProcessor.preprocess (the VAE input, with and without a
// size) and transformers' CLIPImageProcessor (two small configs, one whose
// crop pads, and the transparency colour turned white); Wan 2.1 I2V's own
// config file read and its 224 x 224 output against the rescale / normalize
// formula over the bytes Pillow's resize and crop give (the fixture script
// checked transformers' output is exactly that formula); config errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "error_helpers.h"
#include "image_fixtures.h"
#include "io/clip_image_processor.h"
#include "io/image_reader.h"
#include "io/safetensors.h"
#include "io/vae_image_input.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::image_fixture;

namespace {

// max |got - want| over all elements; REQUIREs the shapes to agree
// (want has a leading batch dimension of 1).
double max_abs_diff(const Tensor& got, const Tensor& want) {
  REQUIRE(want.ndim() == 4);
  REQUIRE(want.dim(0) == 1);
  REQUIRE(got.shape() == Shape{want.dim(1), want.dim(2), want.dim(3)});
  const std::vector<float> a = got.to_vector(), b = want.to_vector();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

}  // namespace

TEST_CASE("image preprocess: the VAE input equals diffusers' VideoProcessor.preprocess") {
  const auto file = SafetensorsFile::open(image_fixture("vae_input.safetensors"));
  const auto& cases = testing::image_manifest().at("vae");
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    CAPTURE(c.dump());
    const InputImage in = read_input_image(image_fixture(c.at("source")));
    const std::optional<int64_t> h = c.at("height").is_null() ? std::nullopt : std::optional<int64_t>(c.at("height"));
    const std::optional<int64_t> w = c.at("width").is_null() ? std::nullopt : std::optional<int64_t>(c.at("width"));
    const Tensor got = vae_image_input(in.image.rgb, h, w, 8);
    CHECK(got.dim(1) == c.at("out_height").get<int64_t>());
    CHECK(got.dim(2) == c.at("out_width").get<int64_t>());
    CHECK(max_abs_diff(got, file->load(c.at("tensor"))) <= 1e-6);
  }
}

TEST_CASE("image preprocess: the VAE input's size rounds down to the scale factor") {
  const RgbImage image = testing::load_reference_png(image_fixture("decoded/rgb_97x61.png"));
  const Tensor t = vae_image_input(image, 61, std::nullopt, 8);  // 61 -> 56, 97 -> 96
  CHECK(t.shape() == Shape{3, 56, 96});
  CHECK_THROWS_AS(vae_image_input(image, 7, 64, 8), ConfigError);
  CHECK_THROWS_WITH(vae_image_input(image, 7, 64, 8),
                    "image-to-video: a 64 x 7 VAE input rounds down to 64 x 0 at the VAE's scale factor 8");
}

TEST_CASE("image preprocess: the CLIP input equals transformers' CLIPImageProcessor") {
  const auto file = SafetensorsFile::open(image_fixture("clip_input.safetensors"));
  const auto& cases = testing::image_manifest().at("clip");
  REQUIRE(cases.size() >= 8);
  for (const auto& c : cases) {
    CAPTURE(c.dump());
    const ClipImageProcessorConfig config =
        read_clip_image_processor_config(image_fixture(c.at("config").get<std::string>() + "/preprocessor_config.json"));
    const InputImage in = read_input_image(image_fixture(c.at("source")));
    CHECK(max_abs_diff(clip_image_input(in.image, config), file->load(c.at("tensor"))) <= 1e-6);
  }
}

TEST_CASE("image preprocess: Wan 2.1 I2V's CLIP config, 224 x 224") {
  const std::string path = image_fixture("wan_i2v_image_processor/preprocessor_config.json");
  const ClipImageProcessorConfig config = read_clip_image_processor_config(path);
  CHECK(config.shortest_edge == 224);
  CHECK(config.crop_height == 224);
  CHECK(config.crop_width == 224);
  CHECK(config.resample == ResampleFilter::kBicubic);
  CHECK(config.rescale_factor == 0.00392156862745098);
  CHECK(config.image_mean[0] == 0.48145466f);
  CHECK(config.image_std[2] == 0.27577711f);

  const auto& spec = testing::image_manifest().at("clip_wan");
  const InputImage in = read_input_image(image_fixture(spec.at("source")));
  const Tensor got = clip_image_input(in.image, config);
  REQUIRE(got.shape() == Shape{3, 224, 224});
  // The reference: rescale and normalize written out over Pillow's bytes.
  const RgbImage bytes = testing::load_reference_png(image_fixture(spec.at("expected_bytes")));
  REQUIRE(bytes.width == 224);
  const float* g = got.data();
  double worst = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 224 * 224; ++i) {
      const auto rescaled = static_cast<float>(double(bytes.pixels[size_t(3 * i + c)]) * 0.00392156862745098);
      const float want = (rescaled - config.image_mean[size_t(c)]) / config.image_std[size_t(c)];
      worst = std::max(worst, std::abs(double(g[c * 224 * 224 + i]) - double(want)));
    }
  CHECK(worst == 0.0);
}

TEST_CASE("image preprocess: CLIP config files, good and bad") {
  testing::TempDir dir("ditgen_test_clip_config");
  // Everything left out: CLIPImageProcessor's defaults (Wan's values).
  const ClipImageProcessorConfig defaults = read_clip_image_processor_config(dir.write("empty.json", "{}"));
  const ClipImageProcessorConfig wan =
      read_clip_image_processor_config(image_fixture("wan_i2v_image_processor/preprocessor_config.json"));
  CHECK(defaults.shortest_edge == wan.shortest_edge);
  CHECK(defaults.image_mean == wan.image_mean);
  CHECK(defaults.image_std == wan.image_std);
  CHECK(defaults.rescale_factor == wan.rescale_factor);
  // Integer forms and a height/width size.
  const ClipImageProcessorConfig ints = read_clip_image_processor_config(
      dir.write("ints.json", R"({"size": 18, "crop_size": 30, "image_mean": 0.5, "resample": 2})"));
  CHECK(ints.shortest_edge == 18);
  CHECK(ints.crop_height == 30);
  CHECK(ints.crop_width == 30);
  CHECK(ints.image_mean[1] == 0.5f);
  CHECK(ints.resample == ResampleFilter::kBilinear);
  const ClipImageProcessorConfig hw =
      read_clip_image_processor_config(dir.write("hw.json", R"({"size": {"height": 20, "width": 30}})"));
  CHECK(hw.shortest_edge == 0);
  CHECK(hw.resize_height == 20);
  CHECK(hw.resize_width == 30);

  const std::pair<std::string, std::string> bad[] = {
      {"[1, 2]", "expected a JSON object"},
      {R"({"resample": 4})", "resample: filter 4 is not supported (1 LANCZOS, 2 BILINEAR, 3 BICUBIC)"},
      {R"({"resample": "bicubic"})", "resample: expected an integer"},
      {R"({"size": {"shortest_edge": 224, "longest_edge": 448}})", "size.longest_edge: not supported"},
      {R"({"size": {"height": 20}})", "size.width: expected a positive integer, got nothing"},
      {R"({"size": {"shortest_edge": 0}})", "size.shortest_edge: expected a positive integer, got 0"},
      {R"({"size": "224"})", "size: expected an integer or an object"},
      {R"({"crop_size": {"height": 20, "width": -3}})", "crop_size.width: expected a positive integer, got -3"},
      {R"({"image_mean": [0.5, 0.5]})", "image_mean: expected a number or a list of 3 numbers"},
      {R"({"image_std": [0.5, "a", 0.5]})", "image_std: expected numbers"},
      {R"({"do_resize": "yes"})", "do_resize: expected"},
      {R"({"image_processor_type": "SiglipImageProcessor"})", "image_processor_type: expected CLIPImageProcessor"},
  };
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    const std::string path = dir.write("bad.json", text);
    const std::string msg = testing::model_error_of([&] { read_clip_image_processor_config(path); });
    CHECK_MESSAGE(msg.rfind(path + ": ", 0) == 0, msg);
    CHECK_MESSAGE(testing::contains(msg, message), msg);
  }
  CHECK(testing::contains(testing::model_error_of([&] { read_clip_image_processor_config(dir.file("absent.json")); }), "absent.json"));
}
