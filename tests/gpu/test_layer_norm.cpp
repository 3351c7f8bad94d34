// CUDA layer_norm (with and without affine) and layer_norm_modulate (adaLN,
// shift/scale read in place from a [B, 6C] modulation output) against the
// CPU ops on odd shapes, every storage type (tolerances: gpu_test_helpers.h).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda layer_norm matches ops::layer_norm") {
  const int64_t b = 3, n = 37, c = 72;
  for (cuda::DType t : gputest::kAllTypes)
    for (bool affine : {true, false}) {
      CAPTURE(cuda::dtype_name(t));
      CAPTURE(affine);
      Tensor x = gputest::rounded(random_tensor({b, n, c}, 1, -3.0f, 5.0f), t);
      Tensor w = gputest::rounded(random_tensor({c}, 2), t), bias = gputest::rounded(random_tensor({c}, 3), t);
      DeviceTensor dx(x, t), dw(w, t), db(bias, t), dy(x.numel(), t);
      cuda::layer_norm(dx.data(), affine ? dw.data() : nullptr, affine ? db.data() : nullptr, dy.data(), b * n, c,
                       1e-5f, t);
      Tensor ref = ops::layer_norm(x, affine ? &w : nullptr, affine ? &bias : nullptr, 1e-5f);
      CHECK(rel_l2(dy.to_host(x.shape()), ref) < gputest::tolerance(t));
    }
}

TEST_CASE("cuda layer_norm_modulate matches ops::layer_norm_modulate") {
  const int64_t b = 3, n = 37, c = 40;
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({b, n, c}, 4, -3.0f, 5.0f), t);
    Tensor mod = gputest::rounded(random_tensor({b, 6 * c}, 5), t);  // [shift | scale | gate | ...] chunks
    DeviceTensor dx(x, t), dmod(mod, t), dy(x.numel(), t);
    cuda::layer_norm_modulate(dx.data(), dmod.at(3 * c), dmod.at(4 * c), 6 * c, dy.data(), b, n, c, 1e-6f, t);
    Tensor ref = Tensor::empty(x.shape());
    ops::layer_norm_modulate(x, mod, 3 * c, 4 * c, 1e-6f, ref);
    CHECK(rel_l2(dy.to_host(x.shape()), ref) < gputest::tolerance(t));
  }
}
