// The C++ shape classifier against the Python reference (classify() in
// scripts/train/shapes_dataset.py) on the fixture made by
// scripts/fixtures/make_shapes_fixture.py: clean renders of every class and degraded
// copies. The port must give Python's answer on every image, right or wrong.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/shape_classifier.h"

using ditgen::eval::classify_shape_image;

namespace {

struct ShapesFixture {
  nlohmann::json expected;
  std::vector<uint8_t> images;  // (count, 32, 32, 3)
};

ShapesFixture load_fixture() {
  const std::string dir = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/shapes/";
  ShapesFixture f;
  std::ifstream js(dir + "expected.json");
  REQUIRE(js.good());
  f.expected = nlohmann::json::parse(js);
  std::ifstream bin(dir + "images.u8", std::ios::binary);
  f.images.assign(std::istreambuf_iterator<char>(bin), {});
  REQUIRE(f.images.size() == static_cast<size_t>(f.expected["count"].get<int>()) * 32 * 32 * 3);
  return f;
}

}  // namespace

TEST_CASE("shape classifier gives the Python reference's answer on every fixture image") {
  const ShapesFixture f = load_fixture();
  const int count = f.expected["count"], clean = f.expected["clean_count"];
  int same = 0, right_clean = 0;
  for (int i = 0; i < count; ++i) {
    const auto g = classify_shape_image(f.images.data() + static_cast<size_t>(i) * 32 * 32 * 3, 32, 32);
    const int want_colour = f.expected["python_colour"][i], want_shape = f.expected["python_shape"][i];
    CAPTURE(i);
    CHECK(g.colour == want_colour);
    CHECK(g.shape == want_shape);
    same += g.colour == want_colour && g.shape == want_shape;
    const int label = f.expected["labels"][i];
    if (i < clean) right_clean += g.colour == label / 5 && g.shape == label % 5;
  }
  MESSAGE("agrees with Python on " << same << "/" << count << "; right on clean renders " << right_clean << "/"
                                   << clean);
  CHECK(right_clean == clean);  // the measure itself is trustworthy on clean data
}

TEST_CASE("shape classifier: no foreground on a flat image, templates have the expected geometry") {
  std::vector<uint8_t> flat(16 * 16 * 3, 90);
  const auto g = classify_shape_image(flat.data(), 16, 16);
  CHECK(g.colour == -1);
  CHECK(g.shape == -1);
  // Circle: centre in, corner out; cross: arm in, corner out; triangle apex.
  CHECK(ditgen::eval::shape_template_covers(0, 0.5, 0.5));
  CHECK_FALSE(ditgen::eval::shape_template_covers(0, 0.02, 0.02));
  CHECK(ditgen::eval::shape_template_covers(4, 0.5, 0.05));
  CHECK_FALSE(ditgen::eval::shape_template_covers(4, 0.1, 0.1));
  CHECK(ditgen::eval::shape_template_covers(2, 0.5, 0.05));
  CHECK_FALSE(ditgen::eval::shape_template_covers(2, 0.1, 0.1));
  CHECK(ditgen::eval::shape_template_covers(3, 0.5, 0.5));   // star centre
  CHECK_FALSE(ditgen::eval::shape_template_covers(3, 0.5, 0.98));  // between the lower points
}

TEST_CASE("shape classifier: a drawn red square on grey is a red square") {
  std::vector<uint8_t> img(32 * 32 * 3);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) {
      const bool in = x >= 8 && x < 24 && y >= 10 && y < 26;
      uint8_t* p = &img[(y * 32 + x) * 3];
      p[0] = in ? 250 : 120, p[1] = in ? 30 : 120, p[2] = in ? 25 : 120;
    }
  const auto g = classify_shape_image(img.data(), 32, 32);
  CHECK(g.colour == 0);
  CHECK(g.shape == 1);
  CHECK(g.shape_iou == doctest::Approx(1.0));
  CHECK(g.foreground_pixels == 16 * 16);
}
