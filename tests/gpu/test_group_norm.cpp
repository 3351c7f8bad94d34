// CUDA group_norm (+ fused SiLU) against ops::group_norm: odd shapes (40
// channels in 8 groups on 13x11 maps, batch 3), a mean far from zero (the
// cancellation case the Chan combine avoids), and groups large enough to be
// split over several blocks. Tolerances: gpu_test_helpers.h.
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

namespace {

void check_group_norm(const Tensor& x_in, int64_t groups, bool silu, cuda::DType t, double tol) {
  const int64_t b = x_in.dim(0), c = x_in.dim(1), s = x_in.numel() / (b * c);
  Tensor x = gputest::rounded(x_in, t);
  Tensor w = gputest::rounded(random_tensor({c}, 21, 0.5f, 1.5f), t);
  Tensor bias = gputest::rounded(random_tensor({c}, 22), t);
  DeviceTensor dx(x, t), dw(w, t), db(bias, t), dy(x.numel(), t);
  cuda::group_norm(dx.data(), dw.data(), db.data(), dy.data(), b, c, s, groups, 1e-6f, silu, t);
  Tensor ref = ops::group_norm(x, groups, w, bias, 1e-6f, silu);
  CHECK(rel_l2(dy.to_host(x.shape()), ref) < tol);
}

}  // namespace

TEST_CASE("cuda group_norm matches ops::group_norm, with and without SiLU") {
  for (cuda::DType t : gputest::kAllTypes)
    for (bool silu : {false, true}) {
      CAPTURE(cuda::dtype_name(t));
      CAPTURE(silu);
      check_group_norm(random_tensor({3, 40, 13, 11}, 1, -2.0f, 3.0f), 8, silu, t, gputest::tolerance(t));
    }
}

TEST_CASE("cuda group_norm: mean far from zero, and groups split over many blocks") {
  // |mean| = 1000 >> std ~ 0.3, float32 only (bf16 cannot even hold the
  // spread). The GPU's float32 mean is good to ~ulp(1000) = 6e-5, i.e. 2e-4
  // of the std (the CPU carries the mean in double): tolerance 2e-3. The
  // E[x^2] - E[x]^2 form would be off by ~100% here.
  check_group_norm(random_tensor({2, 16, 9, 7}, 2, 999.5f, 1000.5f), 4, false, cuda::DType::kF32, 2e-3);
  // 8 channels x 96 x 96 = 73728 values per group: several moment blocks.
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    check_group_norm(random_tensor({1, 32, 96, 96}, 3, -1.0f, 2.0f), 4, true, t, gputest::tolerance(t));
  }
}
