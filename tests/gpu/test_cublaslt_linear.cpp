// The cuBLASLt linear (kernels/cuda/gemm.cu: bias and GELU-tanh + bias
// epilogues, the algorithm cached once per shape) against the CPU op
// (ops::cpu::linear with its activation), ggml test-backend-ops style:
// every storage type, GEMV and GEMM shapes, the real projection sizes of
// the DiT/PixArt/Latte MLPs (scaled down in M), unaligned operands (a
// column offset into a wider output, odd K) that the heuristic must be
// told about, and the unfused path (cublasGemmEx + kernels) on the same
// inputs. Tolerances: gpu_test_helpers.h (the half types round the output).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

namespace {

struct LinearCase {
  int64_t m, n, k;
};

const LinearCase kLinearCases[] = {
    {1, 29, 53},        // GEMV, odd sizes: low alignment
    {37, 29, 53},       // odd GEMM
    {64, 4608, 1152},   // MLP in (DiT/PixArt/Latte, M scaled down)
    {64, 1152, 4608},   // MLP out
    {130, 3456, 1152},  // fused q/k/v projection
    {2, 6912, 1152},    // adaLN modulation (few rows)
};

}  // namespace

TEST_CASE("cuBLASLt linear with bias / GELU-tanh + bias epilogues matches ops::cpu::linear") {
  for (cuda::DType t : gputest::kAllTypes)
    for (const LinearCase& c : kLinearCases)
      for (bool with_bias : {true, false})
        for (bool gelu : {false, true}) {
          CAPTURE(cuda::dtype_name(t));
          CAPTURE(c.m);
          CAPTURE(c.n);
          CAPTURE(c.k);
          CAPTURE(with_bias);
          CAPTURE(gelu);
          Tensor x = gputest::rounded(random_tensor({c.m, c.k}, 4, -1, 1), t);
          Tensor w = gputest::rounded(random_tensor({c.n, c.k}, 5, -0.1f, 0.1f), t);
          Tensor bias = gputest::rounded(random_tensor({c.n}, 6), t);
          DeviceTensor dx(x, t), dw(w, t), db(bias, t), dy(c.m * c.n, t), dy_unfused(c.m * c.n, t);
          cuda::linear(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dy.data(), c.m, c.n, c.k, c.n, t, gelu);
          cuda::linear_unfused(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dy_unfused.data(), c.m, c.n,
                               c.k, c.n, t, gelu);
          const Tensor ref = ops::cpu::linear(x, w, with_bias ? &bias : nullptr,
                                              gelu ? ops::Activation::kGeluTanh : ops::Activation::kNone);
          const Tensor got = dy.to_host({c.m, c.n}), got_unfused = dy_unfused.to_host({c.m, c.n});
          CHECK(rel_l2(got, ref) < gputest::tolerance(t));
          CHECK(rel_l2(got_unfused, ref) < gputest::tolerance(t));
        }
  const cuda::LinearPlanStats s = cuda::linear_plan_stats();
  MESSAGE("cuBLASLt plans: " << s.plans << " keys, " << s.builds << " builds, " << s.hits << " hits");
}

TEST_CASE("cuBLASLt linear: plans are built once per shape and reused") {
  const cuda::DType t = cuda::DType::kBF16;
  const int64_t m = 48, n = 256, k = 96;
  Tensor x = gputest::rounded(random_tensor({m, k}, 8), t);
  Tensor w = gputest::rounded(random_tensor({n, k}, 9, -0.2f, 0.2f), t);
  Tensor bias = gputest::rounded(random_tensor({n}, 10), t);
  DeviceTensor dx(x, t), dw(w, t), db(bias, t), dy(m * n, t);
  cuda::linear(dx.data(), dw.data(), db.data(), dy.data(), m, n, k, n, t, true);
  const cuda::LinearPlanStats first = cuda::linear_plan_stats();
  for (int i = 0; i < 5; ++i) cuda::linear(dx.data(), dw.data(), db.data(), dy.data(), m, n, k, n, t, true);
  const cuda::LinearPlanStats later = cuda::linear_plan_stats();
  CHECK(later.builds == first.builds);
  CHECK(later.plans == first.plans);
  cuda::synchronize();
}

TEST_CASE("cuBLASLt linear into columns of a wider output (linear_into, unaligned columns)") {
  // y's columns [col, col + n) of [m, width]: the output pointer and its
  // leading dimension are not 16-byte multiples for odd col / width.
  for (cuda::DType t : gputest::kAllTypes)
    for (int64_t col : {0, 3, 8})
      for (int64_t width_extra : {0, 5}) {
        const int64_t m = 33, n = 40, k = 24, width = col + n + width_extra;
        CAPTURE(cuda::dtype_name(t));
        CAPTURE(col);
        CAPTURE(width);
        Tensor x = gputest::rounded(random_tensor({m, k}, 11), t);
        Tensor w = gputest::rounded(random_tensor({n, k}, 12), t);
        Tensor bias = gputest::rounded(random_tensor({n}, 13), t);
        Tensor y0 = gputest::rounded(random_tensor({m, width}, 14), t);
        DeviceTensor dx(x, t), dw(w, t), db(bias, t), dy(y0, t);
        cuda::linear(dx.data(), dw.data(), db.data(), dy.at(col), m, n, k, width, t);
        Tensor ref = y0.clone();
        ops::cpu::linear_into(x, w, &bias, ref.data() + col, width);
        CHECK(rel_l2(dy.to_host({m, width}), ref) < gputest::tolerance(t));
      }
}

TEST_CASE("ops::linear on CUDA tensors with GELU-tanh matches the CPU front end") {
  // The front end's path the models take (FeedForward, caption projection).
  for (cuda::DType t : {cuda::DType::kF32, cuda::DType::kBF16}) {
    CAPTURE(cuda::dtype_name(t));
    Tensor x = gputest::rounded(random_tensor({2, 17, 64}, 15), t);
    Tensor w = gputest::rounded(random_tensor({96, 64}, 16, -0.2f, 0.2f), t);
    Tensor b = gputest::rounded(random_tensor({96}, 17), t);
    const Tensor ref = ops::linear(x, w, &b, ops::Activation::kGeluTanh);
    const Tensor xd = x.to(Device::kCUDA, t), wd = w.to(Device::kCUDA, t), bd = b.to(Device::kCUDA, t);
    const Tensor got = ops::linear(xd, wd, &bd, ops::Activation::kGeluTanh).to(Device::kCPU, DType::kF32);
    CHECK(rel_l2(got, ref) < gputest::tolerance(t));
  }
}
