// CUDA upsample_nearest against ops::upsample_nearest: a copy, so results
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
