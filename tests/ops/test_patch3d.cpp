// ops::patchify3d / unpatchify3d against index loops written from their
// definitions (Conv3d(kernel = stride = patch) flattened as [out, C*pt*ph*pw];
// diffusers' Wan output reshape (B, f, h, w, pt, ph, pw, C) + permute (0, 7,
// 1, 4, 2, 5, 3, 6)), on odd grids and patches; the patch embedding as
// linear(patchify3d) equals conv3d with kernel = stride = patch; and
// unpatchify3d inverts patchify3d when the inner orders agree.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <stdexcept>

#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {
using A3 = std::array<int64_t, 3>;
}

TEST_CASE("patchify3d orders tokens (t, h, w) and a patch (c, a, i, j)") {
  for (const A3& p : {A3{1, 2, 2}, A3{2, 3, 1}, A3{1, 1, 1}, A3{3, 2, 5}}) {
    const int64_t b = 2, c = 3, gf = 2, gh = 3, gw = 2;
    const int64_t T = gf * p[0], H = gh * p[1], W = gw * p[2];
    CAPTURE(shape_str({p[0], p[1], p[2]}));
    const Tensor x = random_tensor({b, c, T, H, W}, 1);
    const Tensor y = ops::patchify3d(x, p);
    const int64_t row = c * p[0] * p[1] * p[2];
    REQUIRE(y.shape() == Shape{b, gf * gh * gw, row});
    int64_t wrong = 0;
    for (int64_t n = 0; n < b; ++n)
      for (int64_t f = 0; f < gf; ++f)
        for (int64_t gy = 0; gy < gh; ++gy)
          for (int64_t gx = 0; gx < gw; ++gx)
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t a = 0; a < p[0]; ++a)
                for (int64_t i = 0; i < p[1]; ++i)
                  for (int64_t j = 0; j < p[2]; ++j) {
                    const int64_t tok = (f * gh + gy) * gw + gx, e = ((ch * p[0] + a) * p[1] + i) * p[2] + j;
                    const float want = x[(((n * c + ch) * T + f * p[0] + a) * H + gy * p[1] + i) * W + gx * p[2] + j];
                    wrong += y[(n * gf * gh * gw + tok) * row + e] != want;
                  }
    CHECK(wrong == 0);
  }
}

TEST_CASE("unpatchify3d reads a patch (a, i, j, c) into [B, C, f*pt, h*ph, w*pw]") {
  for (const A3& p : {A3{1, 2, 2}, A3{2, 1, 3}}) {
    const int64_t b = 2, c = 5, gf = 3, gh = 2, gw = 3;
    CAPTURE(shape_str({p[0], p[1], p[2]}));
    const Tensor x = random_tensor({b, gf * gh * gw, p[0] * p[1] * p[2] * c}, 2);
    const Tensor y = ops::unpatchify3d(x, {gf, gh, gw}, p, c);
    const int64_t T = gf * p[0], H = gh * p[1], W = gw * p[2];
    REQUIRE(y.shape() == Shape{b, c, T, H, W});
    int64_t wrong = 0;
    for (int64_t n = 0; n < b; ++n)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t z = 0; z < T; ++z)
          for (int64_t yy = 0; yy < H; ++yy)
            for (int64_t xx = 0; xx < W; ++xx) {
              const int64_t tok = ((z / p[0]) * gh + yy / p[1]) * gw + xx / p[2];
              const int64_t inner = ((z % p[0]) * p[1] + yy % p[1]) * p[2] + xx % p[2];
              wrong += y[(((n * c + ch) * T + z) * H + yy) * W + xx] !=
                       x[(n * gf * gh * gw + tok) * p[0] * p[1] * p[2] * c + inner * c + ch];
            }
    CHECK(wrong == 0);
  }
}

TEST_CASE("unpatchify3d inverts patchify3d with one channel (both inner orders agree)") {
  const A3 p{2, 3, 2};
  const Tensor x = random_tensor({2, 1, 4, 9, 6}, 3);
  const Tensor back = ops::unpatchify3d(ops::patchify3d(x, p), {2, 3, 3}, p, 1);
  REQUIRE(back.shape() == x.shape());
  CHECK(std::memcmp(back.raw(), x.raw(), x.nbytes()) == 0);
}

TEST_CASE("linear(patchify3d(x)) with the flattened Conv3d weight is the patch embedding conv3d") {
  const A3 p{1, 2, 2};
  const int64_t b = 2, c = 3, d = 8;
  const Tensor x = random_tensor({b, c, 3, 10, 14}, 4);
  const Tensor w = random_tensor({d, c, p[0], p[1], p[2]}, 5), bias = random_tensor({d}, 6);
  const Tensor tokens = ops::linear(ops::patchify3d(x, p), w.reshape({d, c * 4}), &bias);  // [B, 105, D]
  const Tensor conv = ops::conv3d(x, w, &bias, p, {0, 0, 0});                              // [B, D, 3, 5, 7]
  REQUIRE(tokens.shape() == Shape{b, 105, d});
  Tensor conv_tokens = Tensor::empty({b, 105, d});  // flatten(2).transpose(1, 2)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t t = 0; t < 105; ++t)
      for (int64_t o = 0; o < d; ++o) conv_tokens[(n * 105 + t) * d + o] = conv[(n * d + o) * 105 + t];
  CHECK(rel_l2(tokens, conv_tokens) < 1e-6);
}

TEST_CASE("patchify3d / unpatchify3d check their shapes") {
  CHECK_THROWS_AS(ops::patchify3d(Tensor::zeros({1, 2, 3, 4, 4}), {2, 2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(ops::patchify3d(Tensor::zeros({1, 2, 4, 4}), {1, 2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(ops::patchify3d(Tensor::zeros({1, 2, 2, 4, 4}), {1, 0, 2}), std::invalid_argument);
  CHECK_THROWS_AS(ops::unpatchify3d(Tensor::zeros({1, 6, 8}), {1, 2, 2}, {1, 2, 2}, 2), std::invalid_argument);
  CHECK_THROWS_AS(ops::unpatchify3d(Tensor::zeros({1, 4, 12}), {1, 2, 2}, {1, 2, 2}, 2), std::invalid_argument);
  CHECK(ops::unpatchify3d(Tensor::zeros({1, 4, 8}), {1, 2, 2}, {1, 2, 2}, 2).shape() == Shape{1, 2, 1, 4, 4});
}
