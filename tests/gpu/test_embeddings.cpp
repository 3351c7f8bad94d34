// CUDA timestep_embedding, patchify and unpatchify against the CPU ops.
// The embedding shares kernels/math/embedding.h with the CPU op: float32
// agrees to a few ulp of sin/cos (1e-5); patch (un)folding is a copy, exact.
#include <doctest/doctest.h>

#include <vector>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda timestep_embedding matches ops::timestep_embedding") {
  const std::vector<float> ts = {0.0f, 1.0f, 37.5f, 500.0f, 999.0f};
  const int64_t n = static_cast<int64_t>(ts.size());
  DeviceTensor dt(Tensor::from_vector({n}, ts), cuda::DType::kF32);
  for (cuda::DType t : gputest::kAllTypes)
    for (int64_t dim : {256, 33})
      for (bool flip : {true, false})
        for (float shift : {1.0f, 0.0f}) {
          CAPTURE(cuda::dtype_name(t));
          CAPTURE(dim);
          CAPTURE(flip);
          CAPTURE(shift);
          Tensor ref = ops::timestep_embedding(ts, dim, flip, shift, 1.5f, 10000.0f);
          DeviceTensor dy(Tensor::full({n, dim}, 7.0f), t);  // the odd column must be overwritten with 0
          cuda::timestep_embedding(static_cast<const float*>(dt.data()), n, dy.data(), dim, flip, shift, 1.5f,
                                   10000.0f, t);
          Tensor got = dy.to_host({n, dim});
          CHECK(rel_l2(got, ref) < gputest::tolerance(t));
          if (dim % 2)
            for (int64_t r = 0; r < n; ++r) CHECK(got[r * dim + dim - 1] == 0.0f);
        }
}

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
