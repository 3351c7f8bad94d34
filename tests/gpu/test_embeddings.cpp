// CUDA patchify and unpatchify against the CPU ops: patch (un)folding is a
// copy, so the results are exact.
#include <doctest/doctest.h>

#include <vector>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;

TEST_CASE("cuda patchify and unpatchify match the CPU ops exactly") {
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    // [3, 5, 14, 10] with patch 2: a 7 x 5 token grid.
    Tensor x = gputest::rounded(random_tensor({3, 5, 14, 10}, 1), t);
    Tensor ref = ops::patchify(x, 2);
    DeviceTensor dx(x, t), dp(ref.numel(), t);
    cuda::patchify(dx.data(), dp.data(), 3, 5, 14, 10, 2, t);
    Tensor got = dp.to_host(ref.shape());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) mismatches += got[i] != ref[i];
    CHECK(mismatches == 0);

    Tensor tokens = gputest::rounded(random_tensor({3, 35, 2 * 2 * 5}, 2), t);
    Tensor img = ops::unpatchify(tokens, 7, 5, 2, 5);
    DeviceTensor dtok(tokens, t), dimg(img.numel(), t);
    cuda::unpatchify(dtok.data(), dimg.data(), 3, 7, 5, 2, 5, t);
    Tensor got_img = dimg.to_host(img.shape());
    mismatches = 0;
    for (int64_t i = 0; i < img.numel(); ++i) mismatches += got_img[i] != img[i];
    CHECK(mismatches == 0);
  }
}
