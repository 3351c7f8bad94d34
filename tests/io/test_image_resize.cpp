// Pillow-exact resampling (io/pillow_resample.h) against Pillow 13's own
// Image.resize bytes: LANCZOS, BICUBIC and BILINEAR from three images to
// sizes down, up, mixed (one axis down, the other up) and along one axis
// only, and a noise image to 24 random sizes per filter up to 32 x 32 and
// to sizes either side of Pillow 13's pass-order rule (tests/fixtures/images,
// made by scripts/fixtures/make_image_fixtures.py).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "image_fixtures.h"
#include "io/pillow_resample.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::image_fixture;

namespace {

ResampleFilter filter_named(const std::string& name) {
  for (ResampleFilter f : {ResampleFilter::kBilinear, ResampleFilter::kBicubic, ResampleFilter::kLanczos})
    if (name == resample_filter_name(f)) return f;
  FAIL("unknown filter " << name);
  return ResampleFilter::kLanczos;
}

}  // namespace

TEST_CASE("pillow resize: byte-equal to Image.resize on the fixture images") {
  const auto& cases = testing::image_manifest().at("resize");
  REQUIRE(cases.size() >= 30);
  for (const auto& c : cases) {
    const RgbImage source = testing::load_reference_png(image_fixture(c.at("source")));
    const std::string filter = c.at("filter");
    const int64_t w = c.at("width"), h = c.at("height");
    CAPTURE(c.dump());
    const RgbImage got = pillow_resize(source, w, h, filter_named(filter));
    const RgbImage want = testing::load_reference_png(image_fixture(c.at("expected")));
    CHECK_MESSAGE(testing::first_difference(got, want) == "", testing::first_difference(got, want));
  }
}

TEST_CASE("pillow resize: byte-equal to Image.resize at random sizes") {
  const auto& spec = testing::image_manifest().at("random_resize");
  const RgbImage source = testing::load_reference_png(image_fixture(spec.at("source")));
  const std::vector<uint8_t> data = testing::read_file(image_fixture(spec.at("data")));
  int checked = 0;
  for (const auto& c : spec.at("cases")) {
    const int64_t w = c.at("width"), h = c.at("height");
    const size_t offset = c.at("offset");
    CAPTURE(c.dump());
    REQUIRE(offset + size_t(w * h * 3) <= data.size());
    RgbImage want = RgbImage::blank(w, h);
    std::copy_n(data.begin() + long(offset), w * h * 3, want.pixels.begin());
    const RgbImage got = pillow_resize(source, w, h, filter_named(c.at("filter")));
    CHECK_MESSAGE(testing::first_difference(got, want) == "", testing::first_difference(got, want));
    ++checked;
  }
  CHECK(checked == 96);
}

TEST_CASE("pillow resize: same size is a copy, bad sizes are argument errors") {
  const RgbImage source = testing::load_reference_png(image_fixture("decoded/rgb_97x61.png"));
  CHECK(testing::first_difference(pillow_resize(source, 97, 61, ResampleFilter::kLanczos), source) == "");
  CHECK_THROWS_AS(pillow_resize(source, 0, 61, ResampleFilter::kLanczos), std::invalid_argument);
  CHECK_THROWS_AS(pillow_resize(source, 97, -1, ResampleFilter::kBicubic), std::invalid_argument);
  CHECK(resample_filter_from_pil_code(1) == ResampleFilter::kLanczos);
  CHECK(resample_filter_from_pil_code(2) == ResampleFilter::kBilinear);
  CHECK(resample_filter_from_pil_code(3) == ResampleFilter::kBicubic);
  CHECK_FALSE(resample_filter_from_pil_code(0).has_value());
  CHECK_FALSE(resample_filter_from_pil_code(4).has_value());
}
