// CUDA silu / gelu / gelu_tanh / relu / add_ / mul_ / gated_residual_ against the
// CPU ops on odd shapes, every storage type (tolerances: gpu_test_helpers.h).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda silu, gelu (exact) and gelu_tanh match the CPU ops, in place and out of place") {
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({3, 1001}, 1, -9.0f, 9.0f), t);
    const int64_t n = x.numel();
    DeviceTensor dx(x, t), dy(n, t);
    cuda::silu(dx.data(), dy.data(), n, t);
    CHECK(rel_l2(dy.to_host(x.shape()), ops::silu(x)) < gputest::tolerance(t));
    DeviceTensor de(x, t);
    cuda::gelu(de.data(), dy.data(), n, t);
    Tensor e = x.clone();
    ops::gelu_(e);
    CHECK(rel_l2(dy.to_host(x.shape()), e) < gputest::tolerance(t));
    cuda::gelu_tanh(dx.data(), dx.data(), n, t);  // in place
    Tensor g = x.clone();
    ops::gelu_tanh_(g);
    CHECK(rel_l2(dx.to_host(x.shape()), g) < gputest::tolerance(t));
  }
}

TEST_CASE("cuda add_ and gated_residual_ match the CPU ops") {
  const int64_t b = 3, n = 37, c = 40;
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({b, n, c}, 2), t);
    Tensor y = gputest::rounded(random_tensor({b, n, c}, 3), t);
    Tensor mod = gputest::rounded(random_tensor({b, 6 * c}, 4), t);  // gate = chunk 2 of an adaLN output
    DeviceTensor dx(x, t), dy(y, t), dmod(mod, t);
    cuda::add_(dx.data(), dy.data(), x.numel(), t);
    Tensor sum = x.clone();
    ops::add_(sum, y);
    CHECK(rel_l2(dx.to_host(x.shape()), sum) < gputest::tolerance(t));

    DeviceTensor dx2(x, t);
    cuda::gated_residual_(dx2.data(), dy.data(), dmod.at(2 * c), 6 * c, b, n, c, t);
    Tensor ref = x.clone();
    ops::gated_residual_(ref, y, mod, 2 * c);
    CHECK(rel_l2(dx2.to_host(x.shape()), ref) < gputest::tolerance(t));
  }
}

TEST_CASE("cuda relu and mul_ match the CPU ops (T5's gated feed-forward)") {
  const int64_t b = 3, n = 37, c = 41;
  for (cuda::DType t : gputest::kAllTypes) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({b, n, c}, 5, -4.0f, 4.0f), t);
    Tensor y = gputest::rounded(random_tensor({b, n, c}, 6, -3.0f, 3.0f), t);
    DeviceTensor dx(x, t), dy(y, t), dr(x.numel(), t);
    cuda::relu(dx.data(), dr.data(), x.numel(), t);
    Tensor relu = x.clone();
    ops::relu_(relu);
    // max(x, 0) of a value already in the storage type: exact.
    CHECK(rel_l2(dr.to_host(x.shape()), relu) == 0.0);
    cuda::relu(dx.data(), dx.data(), x.numel(), t);  // in place
    CHECK(rel_l2(dx.to_host(x.shape()), relu) == 0.0);

    cuda::mul_(dx.data(), dy.data(), x.numel(), t);  // relu(x) * y
    ops::mul_(relu, y);
    CHECK(rel_l2(dx.to_host(x.shape()), relu) < gputest::tolerance(t));
  }
}
