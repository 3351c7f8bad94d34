// CUDA upsample_nearest and interleave_upsample_phases against the ops: copies, so results
// are exact in every storage type (inputs pre-rounded to it).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;

TEST_CASE("cuda upsample_nearest matches ops::upsample_nearest exactly") {
  for (cuda::DType t : gputest::kAllTypes)
    for (int64_t f : {1, 2, 3}) {
      CAPTURE(cuda::dtype_name(t));
      CAPTURE(f);
      Tensor x = gputest::rounded(random_tensor({3, 5, 13, 11}, 1), t);
      Tensor ref = ops::upsample_nearest(x, f);
      DeviceTensor dx(x, t), dy(ref.numel(), t);
      cuda::upsample_nearest(dx.data(), dy.data(), 3, 5, 13, 11, f, t);
      Tensor got = dy.to_host(ref.shape());
      int64_t mismatches = 0;
      for (int64_t i = 0; i < ref.numel(); ++i) mismatches += got[i] != ref[i];
      CHECK(mismatches == 0);
    }
}

TEST_CASE("cuda interleave_upsample_phases matches ops::interleave_upsample_phases exactly") {
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor y = gputest::rounded(random_tensor({2, 12, 6, 8}, 2), t);  // (B, 4C, H+1, W+1): C 3, H 5, W 7
    Tensor ref = ops::interleave_upsample_phases(y);
    DeviceTensor dy(y, t), dout(ref.numel(), t);
    cuda::interleave_upsample_phases(dy.data(), dout.data(), 2, 3, 5, 7, t);
    Tensor got = dout.to_host(ref.shape());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) mismatches += got[i] != ref[i];
    CHECK(mismatches == 0);
  }
}
