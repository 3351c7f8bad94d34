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

TEST_CASE("interleave_upsample_phases: phase (py, px)'s pixel (i, j) is y[(2 py + px) C + c, i + py, j + px]") {
  const int64_t B = 2, C = 3, H = 4, W = 5;
  Tensor y = Tensor::empty({B, 4 * C, H + 1, W + 1});
  for (int64_t i = 0; i < y.numel(); ++i) y[i] = static_cast<float>(i);
  Tensor out = ditgen::ops::interleave_upsample_phases(y);
  REQUIRE(out.shape() == ditgen::Shape{B, C, 2 * H, 2 * W});
  int64_t bad = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t py = 0; py < 2; ++py)
        for (int64_t px = 0; px < 2; ++px)
          for (int64_t i = 0; i < H; ++i)
            for (int64_t j = 0; j < W; ++j) {
              const float want = y[(((b * 4 + 2 * py + px) * C + c) * (H + 1) + i + py) * (W + 1) + j + px];
              bad += out[((b * C + c) * 2 * H + 2 * i + py) * 2 * W + 2 * j + px] != want;
            }
  CHECK(bad == 0);
  CHECK_THROWS_AS(ditgen::ops::interleave_upsample_phases(Tensor::zeros({1, 6, 3, 3})), std::invalid_argument);
}
