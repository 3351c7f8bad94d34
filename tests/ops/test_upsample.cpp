// ops::upsample_nearest against the index definition out[y, x] = in[y/f, x/f].
#include <doctest/doctest.h>

#include <stdexcept>

#include "ops/ops.h"

using ditgen::Tensor;

TEST_CASE("upsample_nearest copies each pixel into an f x f block") {
  for (int64_t f : {1, 2, 3}) {
    CAPTURE(f);
    const int64_t B = 2, C = 3, H = 5, W = 7;
    Tensor x = Tensor::empty({B, C, H, W});
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3.0f;
    Tensor y = ditgen::ops::upsample_nearest(x, f);
    REQUIRE(y.shape() == ditgen::Shape{B, C, H * f, W * f});
    int64_t bad = 0;
    for (int64_t bc = 0; bc < B * C; ++bc)
      for (int64_t oy = 0; oy < H * f; ++oy)
        for (int64_t ox = 0; ox < W * f; ++ox)
          bad += y[(bc * H * f + oy) * W * f + ox] != x[(bc * H + oy / f) * W + ox / f];
    CHECK(bad == 0);
  }
}

TEST_CASE("upsample_nearest rejects bad arguments") {
  Tensor x = Tensor::zeros({1, 2, 3});
  CHECK_THROWS_AS(ditgen::ops::upsample_nearest(x, 2), std::invalid_argument);
  Tensor y = Tensor::zeros({1, 1, 2, 2});
  CHECK_THROWS_AS(ditgen::ops::upsample_nearest(y, 0), std::invalid_argument);
}
