// The image-to-video default frame size (io/i2v_frame_size.h) against
// diffusers' Wan I2V example formula evaluated by Python (numpy sqrt,
// Python round) on 40 image sizes at three areas and multiples
// (tests/fixtures/images/manifest.json "default_size"), and where Wan's own
// image2video.py rule differs from it.
#include <doctest/doctest.h>

#include <string>

#include "image_fixtures.h"
#include "io/i2v_frame_size.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;

TEST_CASE("i2v frame size: diffusers' Wan I2V example rule") {
  const auto& table = testing::image_manifest().at("default_size");
  REQUIRE(table.size() == 120);
  int differs_from_wan = 0;
  for (const auto& row : table) {
    CAPTURE(row.dump());
    const int64_t h = row.at("height"), w = row.at("width");
    if (h == 0 || w == 0) {
      CHECK_THROWS_AS(i2v_default_frame_size(row.at("image_height"), row.at("image_width"), row.at("max_area"),
                                             row.at("multiple")),
                      ConfigError);
      continue;
    }
    const FrameSize got =
        i2v_default_frame_size(row.at("image_height"), row.at("image_width"), row.at("max_area"), row.at("multiple"));
    CHECK(got.height == h);
    CHECK(got.width == w);
    CHECK(got.height % row.at("multiple").get<int64_t>() == 0);
    if (row.at("wan_height") != row.at("height") || row.at("wan_width") != row.at("width")) ++differs_from_wan;
  }
  // Wan's floor instead of round: one multiple less in 9 of the 120 cases.
  CHECK(differs_from_wan == 9);
}

TEST_CASE("i2v frame size: known cases and refusals") {
  // The area's own shape comes back (Wan's code gives 464 x 832 here).
  const FrameSize same = i2v_default_frame_size(480, 832, 480 * 832, 16);
  CHECK(same.height == 480);
  CHECK(same.width == 832);
  const FrameSize portrait = i2v_default_frame_size(1280, 720, 480 * 832, 16);
  CHECK(portrait.height == 832);
  CHECK(portrait.width == 464);
  CHECK_THROWS_WITH(i2v_default_frame_size(1, 16384, 480 * 832, 16),
                    "image-to-video frame size: a 16384 x 1 image gives 80880 x 0 at area 399360 in multiples of 16; "
                    "give height and width");
  CHECK_THROWS_AS(i2v_default_frame_size(0, 5, 100, 16), ConfigError);
  CHECK_THROWS_AS(i2v_default_frame_size(5, 5, 100, 0), ConfigError);
}
