// CUDA rms_norm (T5LayerNorm) against ops::rms_norm on odd widths and large
// magnitudes, every storage type (tolerances: gpu_test_helpers.h).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda rms_norm matches ops::rms_norm") {
  struct Case {
    int64_t rows, c;
    float lo, hi;
  };
  // Widths that are not a multiple of the warp, one past it, T5-XXL's 4096.
  for (const Case& k : {Case{3 * 37, 40, -1, 1}, Case{11, 37, -3e4f, 3e4f}, Case{5, 33, 1e3f, 2e3f},
                        Case{2, 4096, -50, 80}, Case{1, 1, -2, 2}})
    for (cuda::DType t : gputest::kAllTypes) {
      CAPTURE(cuda::dtype_name(t));
      CAPTURE(k.rows);
      CAPTURE(k.c);
      // float16 holds at most 65504: the large case stays within it.
      Tensor x = gputest::rounded(random_tensor({k.rows, k.c}, 1, k.lo, k.hi), t);
      Tensor w = gputest::rounded(random_tensor({k.c}, 2, 0.5f, 2.0f), t);
      DeviceTensor dx(x, t), dw(w, t), dy(x.numel(), t);
      cuda::rms_norm(dx.data(), dw.data(), dy.data(), k.rows, k.c, 1e-6f, t);
      CHECK(rel_l2(dy.to_host(x.shape()), ops::rms_norm(x, w, 1e-6f)) < gputest::tolerance(t));
    }
}
