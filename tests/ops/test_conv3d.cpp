// ops::conv3d against a direct 8-loop convolution in double, on odd shapes:
// 3x3x3 with spatial padding only (WanCausalConv3d's form, its time padding
// being the caller's frames), full symmetric padding, (3,1,1) time kernels,
// 1x1x1, strides per axis, non-cubic kernels, a Conv3d(kernel = stride)
// patch embedding; float32 and bfloat16 weights (the bfloat16 conv rounds x
// and w to bfloat16 and sums in float32: the reference takes the rounded
// operands). The CPU's time slabs (ops/cpu/onednn_conv.h: a large conv in
// runs of output frames read in place) under budgets small enough to make
// slabs of one, two and three frames, with a remainder, batches and time
// strides.
#include <doctest/doctest.h>

#include <array>
#include <stdexcept>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "tensor/half.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

using A3 = std::array<int64_t, 3>;

Tensor rounded_bf16(const Tensor& x) {
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i) y[i] = bf16_to_f32(f32_to_bf16(y[i]));
  return y;
}

std::vector<double> conv3d_reference(const Tensor& x, const Tensor& w, const Tensor* bias, A3 s, A3 p) {
  const int64_t B = x.dim(0), Ci = x.dim(1), T = x.dim(2), H = x.dim(3), W = x.dim(4);
  const int64_t Co = w.dim(0), kt = w.dim(2), kh = w.dim(3), kw = w.dim(4);
  const int64_t To = (T + 2 * p[0] - kt) / s[0] + 1, Ho = (H + 2 * p[1] - kh) / s[1] + 1,
                Wo = (W + 2 * p[2] - kw) / s[2] + 1;
  std::vector<double> out(static_cast<size_t>(B * Co * To * Ho * Wo));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t oz = 0; oz < To; ++oz)
        for (int64_t oy = 0; oy < Ho; ++oy)
          for (int64_t ox = 0; ox < Wo; ++ox) {
            double acc = bias ? (*bias)[co] : 0.0;
            for (int64_t ci = 0; ci < Ci; ++ci)
              for (int64_t dz = 0; dz < kt; ++dz)
                for (int64_t dy = 0; dy < kh; ++dy)
                  for (int64_t dx = 0; dx < kw; ++dx) {
                    const int64_t iz = oz * s[0] - p[0] + dz, iy = oy * s[1] - p[1] + dy, ix = ox * s[2] - p[2] + dx;
                    if (iz < 0 || iz >= T || iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    acc += double(x[(((b * Ci + ci) * T + iz) * H + iy) * W + ix]) *
                           w[(((co * Ci + ci) * kt + dz) * kh + dy) * kw + dx];
                  }
            out[(((b * Co + co) * To + oz) * Ho + oy) * Wo + ox] = acc;
          }
  return out;
}

struct Case {
  Shape x;
  int64_t cout;
  A3 k, s, p;
  bool bias;
};

// ops::conv3d, or with slab_bytes > 0 the CPU convolution itself in slabs
// of at most that many bytes.
Tensor conv3d_under_test(const Tensor& x, const Tensor& w, const Tensor* bias, A3 s, A3 p, int64_t slab_bytes) {
  return slab_bytes == 0 ? ops::conv3d(x, w, bias, s, p) : ops::cpu::conv3d(x, w, bias, s, p, slab_bytes);
}

void check(const Case& c, bool bf16_weight, int64_t slab_bytes = 0) {
  CAPTURE(slab_bytes);
  CAPTURE(shape_str(c.x));
  CAPTURE(c.cout);
  CAPTURE(shape_str({c.k[0], c.k[1], c.k[2]}));
  CAPTURE(shape_str({c.s[0], c.s[1], c.s[2]}));
  CAPTURE(shape_str({c.p[0], c.p[1], c.p[2]}));
  CAPTURE(c.bias);
  CAPTURE(bf16_weight);
  const Tensor x = random_tensor(c.x, 1), w = random_tensor({c.cout, c.x[1], c.k[0], c.k[1], c.k[2]}, 2, -0.5f, 0.5f);
  const Tensor bias = random_tensor({c.cout}, 3);
  const Tensor* bp = c.bias ? &bias : nullptr;
  const Tensor got = conv3d_under_test(x, bf16_weight ? w.to(DType::kBF16) : w, bp, c.s, c.p, slab_bytes);
  const std::vector<double> ref =
      bf16_weight ? conv3d_reference(rounded_bf16(x), rounded_bf16(w), bp, c.s, c.p) : conv3d_reference(x, w, bp, c.s, c.p);
  REQUIRE(got.numel() == static_cast<int64_t>(ref.size()));
  CHECK(got.dim(1) == c.cout);
  const double err = rel_l2(got, ref);
  CAPTURE(err);
  CHECK(err < 1e-5);
}

const Case kCases[] = {
    {{1, 4, 5, 7, 9}, 5, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, true},   // causal form: spatial padding only
    {{2, 3, 4, 5, 6}, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, false},  // symmetric padding on every axis
    {{2, 5, 6, 3, 4}, 3, {3, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},   // upsample3d's time conv
    {{2, 6, 3, 5, 7}, 4, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},   // 1x1x1 shortcut
    {{1, 3, 7, 9, 11}, 2, {3, 3, 3}, {2, 2, 1}, {0, 1, 0}, true},  // strides per axis
    {{1, 2, 5, 6, 7}, 3, {2, 3, 1}, {1, 2, 3}, {1, 0, 0}, true},   // non-cubic kernel
    {{2, 3, 3, 10, 14}, 8, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, true}, // Wan's patch embedding
    {{1, 3, 1, 1, 1}, 2, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true},   // one voxel: only the centre tap
};

}  // namespace

TEST_CASE("conv3d with a float32 weight matches a direct convolution in double") {
  for (const Case& c : kCases) check(c, false);
}

TEST_CASE("conv3d with a bfloat16 weight matches the direct convolution of the bfloat16-rounded operands") {
  for (const Case& c : kCases) check(c, true);
}

TEST_CASE("the CPU conv3d in time slabs matches the direct convolution") {
  // Per output frame of the causal form, 1584 bytes of input (792 in
  // bfloat16) and 1980 of output, beside a two-frame halo: budgets of 1 byte
  // (one frame a slab), 12 KiB (two frames, three in bfloat16) and 14 KiB
  // (three, four), with remainders.
  const Case slabbed[] = {
      {{1, 4, 8, 9, 11}, 5, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, true},   // the causal form, 6 output frames
      {{2, 4, 7, 9, 11}, 3, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, false},  // CogVideoX's upsampler conv, batch 2
      {{1, 4, 9, 9, 11}, 5, {3, 1, 1}, {2, 1, 1}, {0, 0, 0}, true},   // time stride 2: 4 output frames
      {{1, 4, 5, 9, 11}, 2, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},   // 1x1x1
  };
  for (const int64_t budget : {int64_t{1}, int64_t{12} << 10, int64_t{14} << 10})
    for (const Case& c : slabbed)
      for (const bool bf16 : {false, true}) check(c, bf16, budget);
}

TEST_CASE("conv3d rejects mismatched shapes and bad geometry") {
  const Tensor x = Tensor::zeros({1, 3, 4, 5, 5});
  CHECK_THROWS_AS(ops::conv3d(x, Tensor::zeros({2, 4, 3, 3, 3}), nullptr, {1, 1, 1}, {0, 1, 1}),
                  std::invalid_argument);  // channels
  CHECK_THROWS_AS(ops::conv3d(x, Tensor::zeros({2, 3, 5, 3, 3}), nullptr, {1, 1, 1}, {0, 1, 1}),
                  std::invalid_argument);  // kernel longer than the frames
  CHECK_THROWS_AS(ops::conv3d(x, Tensor::zeros({2, 3, 3, 3, 3}), nullptr, {1, 0, 1}, {0, 1, 1}),
                  std::invalid_argument);  // stride 0
  CHECK_THROWS_AS(ops::conv3d(x, Tensor::zeros({2, 3, 3, 3, 3}), nullptr, {1, 1, 1}, {0, -1, 1}),
                  std::invalid_argument);
  const Tensor b3 = Tensor::zeros({3});
  CHECK_THROWS_AS(ops::conv3d(x, Tensor::zeros({2, 3, 3, 3, 3}), &b3, {1, 1, 1}, {0, 1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(ops::conv3d(Tensor::zeros({3, 4, 5, 5}), Tensor::zeros({2, 3, 3, 3, 3}), nullptr, {1, 1, 1},
                              {0, 1, 1}),
                  std::invalid_argument);  // 4-D input
  CHECK_THROWS_AS(ops::conv3d(x.to(DType::kBF16), Tensor::zeros({2, 3, 3, 3, 3}), nullptr, {1, 1, 1}, {0, 1, 1}),
                  std::invalid_argument);  // CPU activations are float32
  CHECK(ops::conv3d(x, Tensor::zeros({2, 3, 3, 3, 3}), nullptr, {1, 1, 1}, {0, 1, 1}).shape() == Shape{1, 2, 2, 5, 5});
}
