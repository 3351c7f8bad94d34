// CUDA conv2d against ops::conv2d: 3x3 kernels with stride 1 and 2 and
// padding 1 on 13x11 images (odd sizes: partial last rows / columns), a
// 1x1 kernel (the batched plain-GEMM path), with and without bias, batch 3,
// every storage type (tolerances: gpu_test_helpers.h); and an image large
// enough that the output rows go through im2col in several chunks.
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda conv2d matches ops::conv2d") {
  struct Case { int64_t k, stride, pad; };
  const int64_t b = 3, cin = 5, h = 13, w = 11, cout = 7;
  for (cuda::DType t : gputest::kAllTypes)
    for (Case c : {Case{3, 1, 1}, Case{3, 2, 1}, Case{1, 1, 0}, Case{3, 2, 0}})
      for (bool with_bias : {true, false}) {
        CAPTURE(cuda::dtype_name(t));
        CAPTURE(c.k);
        CAPTURE(c.stride);
        CAPTURE(c.pad);
        CAPTURE(with_bias);
        Tensor x = gputest::rounded(random_tensor({b, cin, h, w}, 1), t);
        Tensor wt = gputest::rounded(random_tensor({cout, cin, c.k, c.k}, 2), t);
        Tensor bias = gputest::rounded(random_tensor({cout}, 3), t);
        Tensor ref = ops::conv2d(x, wt, with_bias ? &bias : nullptr, c.stride, c.pad);
        DeviceTensor dx(x, t), dw(wt, t), db(bias, t), dy(ref.numel(), t);
        cuda::conv2d(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dy.data(), b, cin, h, w, cout, c.k, c.k,
                     c.stride, c.pad, t);
        CHECK(rel_l2(dy.to_host(ref.shape()), ref) < gputest::tolerance(t));
      }
}

TEST_CASE("cuda conv2d: output rows split over several im2col chunks") {
  // 64 channels, 3x3, on 256 x 256: one output row of columns is 576 x 256
  // values, so the 64 MiB column budget holds 113 float32 rows (227 at 16
  // bits): 3 (2) chunks per image, the last one partial, for each of 2 images.
  const int64_t b = 2, cin = 64, h = 256, w = 256, cout = 4;
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({b, cin, h, w}, 4), t);
    Tensor wt = gputest::rounded(random_tensor({cout, cin, 3, 3}, 5, -0.1f, 0.1f), t);
    Tensor bias = gputest::rounded(random_tensor({cout}, 6), t);
    Tensor ref = ops::conv2d(x, wt, &bias, 1, 1);
    DeviceTensor dx(x, t), dw(wt, t), db(bias, t), dy(ref.numel(), t);
    cuda::conv2d(dx.data(), dw.data(), db.data(), dy.data(), b, cin, h, w, cout, 3, 3, 1, 1, t);
    CHECK(rel_l2(dy.to_host(ref.shape()), ref) < gputest::tolerance(t));
  }
}

TEST_CASE("cuda conv2d rejects bad geometry") {
  DeviceTensor d(16, cuda::DType::kF32);
  CHECK_THROWS_AS(cuda::conv2d(d.data(), d.data(), nullptr, d.data(), 1, 1, 2, 2, 1, 3, 3, 1, 0, cuda::DType::kF32),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::conv2d(d.data(), d.data(), nullptr, d.data(), 1, 1, 2, 2, 1, 1, 1, 0, 0, cuda::DType::kF32),
                  std::invalid_argument);
}
