// PSNR and SSIM against values computed by scripts/fixtures/make_shapes_fixture.py
// (numpy, separable Gaussian filtering: a different route from the C++
// per-window sums), plus closed forms: a constant offset d gives PSNR
// 10·log10(255²/d²); two flat images p, q give SSIM (2pq + c1)/(p² + q² + c1).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/image_metrics.h"

using ditgen::eval::psnr;
using ditgen::eval::ssim;

TEST_CASE("psnr and ssim match the numpy reference on fixture image pairs") {
  const std::string dir = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/shapes/";
  std::ifstream js(dir + "expected.json");
  REQUIRE(js.good());
  const auto expected = nlohmann::json::parse(js);
  std::ifstream bin(dir + "images.u8", std::ios::binary);
  const std::vector<uint8_t> images(std::istreambuf_iterator<char>(bin), {});
  const size_t image_bytes = 32 * 32 * 3;
  for (const auto& m : expected["metrics"]) {
    const uint8_t* a = images.data() + m["a"].get<size_t>() * image_bytes;
    const uint8_t* b = images.data() + m["b"].get<size_t>() * image_bytes;
    CAPTURE(m.dump());
    CHECK(ssim(a, b, 32, 32, 3) == doctest::Approx(m["ssim"].get<double>()).epsilon(1e-9));
    if (m["psnr"].is_null())
      CHECK(std::isinf(psnr(a, b, 32, 32, 3)));
    else
      CHECK(psnr(a, b, 32, 32, 3) == doctest::Approx(m["psnr"].get<double>()).epsilon(1e-9));
  }
}

TEST_CASE("psnr and ssim closed forms") {
  std::vector<uint8_t> a(20 * 24 * 3, 100), b(20 * 24 * 3, 105);
  CHECK(psnr(a.data(), b.data(), 20, 24, 3) == doctest::Approx(10 * std::log10(255.0 * 255.0 / 25.0)));
  const double c1 = (0.01 * 255) * (0.01 * 255);
  CHECK(ssim(a.data(), b.data(), 20, 24, 3) == doctest::Approx((2 * 100.0 * 105 + c1) / (100.0 * 100 + 105.0 * 105 + c1)));
  CHECK(ssim(a.data(), a.data(), 20, 24, 3) == doctest::Approx(1.0));
  // Smaller than the 11x11 window: clipped window, still 1 for identical.
  CHECK(ssim(a.data(), a.data(), 5, 7, 1) == doctest::Approx(1.0));
}
