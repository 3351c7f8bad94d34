// ops::conv2d against a direct 7-loop convolution in double, on odd shapes
// that exercise every path: 1x1 stride 1 (plain GEMM), 1x1 strided, 3x3
// padded / unpadded / strided, a non-square kernel, and a map wide enough
// that the im2col buffer is split into several row chunks (last one partial).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "ops/ops.h"
#include "test_helpers.h"

using ditgen::Tensor;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

Tensor conv_reference(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p) {
  const int64_t B = x.dim(0), Cin = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t Cout = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t Ho = (H + 2 * p - kh) / s + 1, Wo = (W + 2 * p - kw) / s + 1;
  Tensor out = Tensor::zeros({B, Cout, Ho, Wo});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t oy = 0; oy < Ho; ++oy)
        for (int64_t ox = 0; ox < Wo; ++ox) {
          double acc = bias ? (*bias)[co] : 0.0;
          for (int64_t ci = 0; ci < Cin; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += double(x[((b * Cin + ci) * H + iy) * W + ix]) * w[((co * Cin + ci) * kh + ky) * kw + kx];
              }
          out[((b * Cout + co) * Ho + oy) * Wo + ox] = static_cast<float>(acc);
        }
  return out;
}

void check_conv(int64_t B, int64_t Cin, int64_t Cout, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t stride,
                int64_t pad, bool with_bias) {
  INFO("B=", B, " Cin=", Cin, " Cout=", Cout, " H=", H, " W=", W, " k=", kh, "x", kw, " stride=", stride,
       " pad=", pad, " bias=", with_bias);
  Tensor x = random_tensor({B, Cin, H, W}, 1);
  Tensor w = random_tensor({Cout, Cin, kh, kw}, 2);
  Tensor bias = random_tensor({Cout}, 3);
  const Tensor* bp = with_bias ? &bias : nullptr;
  Tensor got = ditgen::ops::conv2d(x, w, bp, stride, pad);
  Tensor ref = conv_reference(x, w, bp, stride, pad);
  CHECK(rel_l2(got, ref) < 1e-5);
}

}  // namespace

TEST_CASE("conv2d 3x3 pad 1 matches direct convolution") {
  check_conv(2, 3, 5, 7, 9, 3, 3, 1, 1, true);
  check_conv(1, 4, 2, 1, 1, 3, 3, 1, 1, true);  // 1x1 map: only the centre tap sees data
  check_conv(2, 3, 5, 7, 9, 3, 3, 1, 1, false);
}

TEST_CASE("conv2d 1x1 (plain GEMM path) matches direct convolution") {
  check_conv(2, 3, 5, 7, 9, 1, 1, 1, 0, true);
  check_conv(2, 3, 5, 7, 9, 1, 1, 1, 0, false);
}

TEST_CASE("conv2d strided, unpadded and non-square kernels match direct convolution") {
  check_conv(2, 3, 5, 7, 9, 3, 3, 2, 1, true);
  check_conv(2, 3, 5, 7, 9, 1, 1, 2, 0, true);
  check_conv(2, 3, 5, 7, 9, 3, 3, 1, 0, true);
  check_conv(2, 3, 5, 8, 10, 3, 3, 2, 0, true);
  check_conv(1, 3, 4, 7, 9, 2, 3, 1, 1, true);
  check_conv(1, 2, 3, 6, 5, 5, 5, 3, 2, true);
}

TEST_CASE("conv2d splits a large im2col into row chunks") {
  // K = 64*9 = 576, Wo = 300: 691 KB per output row, several chunks of 2 MB per thread.
  check_conv(1, 64, 6, 31, 300, 3, 3, 1, 1, true);
}

TEST_CASE("conv2d rejects mismatched shapes") {
  Tensor x = Tensor::zeros({1, 3, 5, 5});
  Tensor w = Tensor::zeros({2, 4, 3, 3});
  CHECK_THROWS_AS(ditgen::ops::conv2d(x, w, nullptr, 1, 1), std::invalid_argument);
  Tensor w2 = Tensor::zeros({2, 3, 7, 7});
  CHECK_THROWS_AS(ditgen::ops::conv2d(x, w2, nullptr, 1, 0), std::invalid_argument);
}
