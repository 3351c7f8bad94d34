// CUDA gemm / linear against the CPU ops (OpenBLAS) on odd shapes, every
// storage type (tolerances: gpu_test_helpers.h). The float32 check at 1e-5
// also proves no TF32 is used by default (TF32 would be ~1e-3 off).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("cuda gemm matches ops::gemm for every transpose combination") {
  const int64_t m = 37, n = 29, k = 53;
  for (cuda::DType t : gputest::kAllTypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(cuda::dtype_name(t));
        CAPTURE(ta);
        CAPTURE(tb);
        // Stored as op() expects: A is [m, k] or [k, m], B is [k, n] or [n, k];
        // leading dimensions wider than the rows (a slice of a wider matrix).
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
        Tensor a = gputest::rounded(random_tensor({ta ? k : m, lda}, 1), t);
        Tensor b = gputest::rounded(random_tensor({tb ? n : k, ldb}, 2), t);
        Tensor c = gputest::rounded(random_tensor({m, ldc}, 3), t);
        DeviceTensor da(a, t), db(b, t), dc(c, t);
        cuda::gemm(ta, tb, m, n, k, 0.7f, da.data(), lda, db.data(), ldb, 0.3f, dc.data(), ldc, t);
        ops::cpu::gemm(ta, tb, m, n, k, 0.7f, a.data(), lda, b.data(), ldb, 0.3f, c.data(), ldc);
        CHECK(rel_l2(dc.to_host({m, ldc}), c) < gputest::tolerance(t));
      }
}

TEST_CASE("cuda linear matches ops::linear (GEMV and GEMM shapes, with and without bias)") {
  const int64_t n = 29, k = 53;
  for (cuda::DType t : gputest::kAllTypes)
    for (int64_t m : {1, 37})
      for (bool with_bias : {true, false}) {
        CAPTURE(cuda::dtype_name(t));
        CAPTURE(m);
        CAPTURE(with_bias);
        Tensor x = gputest::rounded(random_tensor({m, k}, 4), t);
        Tensor w = gputest::rounded(random_tensor({n, k}, 5), t);
        Tensor bias = gputest::rounded(random_tensor({n}, 6), t);
        DeviceTensor dx(x, t), dw(w, t), db(bias, t);
        // Written into columns [0, n) of a wider [m, n + 7] buffer (linear_into).
        const int64_t ldy = n + 7;
        Tensor y_init = random_tensor({m, ldy}, 7);
        DeviceTensor dy(y_init, t);
        cuda::linear(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dy.data(), m, n, k, ldy, t);
        Tensor ref = y_init.clone();
        ops::cpu::linear_into(x, w, with_bias ? &bias : nullptr, ref.data(), ldy);
        Tensor got = dy.to_host({m, ldy});
        CHECK(rel_l2(got, ref) < gputest::tolerance(t));
        // The columns past n are untouched.
        Tensor init_rounded = gputest::rounded(y_init, t);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = n; j < ldy; ++j) CHECK(got[i * ldy + j] == init_rounded[i * ldy + j]);
      }
}

TEST_CASE("cuda gemm_strided_batched: interleaved heads, and a shared (stride 0) A") {
  // 3 heads of width 8 interleaved in rows of 24: C_h = A_h · B_h^T.
  const int64_t heads = 3, d = 8, m = 13, n = 11, inner = heads * d;
  const cuda::DType t = cuda::DType::kF32;
  Tensor a = random_tensor({m, inner}, 8), b = random_tensor({n, inner}, 9);
  DeviceTensor da(a, t), db(b, t), dc(heads * m * n, t);
  cuda::gemm_strided_batched(false, true, m, n, d, 1.0f, da.data(), inner, d, db.data(), inner, d, 0.0f, dc.data(), n,
                             m * n, heads, t);
  Tensor ref = Tensor::empty({heads, m, n});
  for (int64_t h = 0; h < heads; ++h)
    ops::cpu::gemm(false, true, m, n, d, 1.0f, a.data() + h * d, inner, b.data() + h * d, inner, 0.0f,
              ref.data() + h * m * n, n);
  CHECK(rel_l2(dc.to_host({heads, m, n}), ref) < 1e-5);

  // One weight for 3 images: out_i = W · x_i.
  Tensor w = random_tensor({5, 7}, 10), x = random_tensor({3, 7, 9}, 11);
  DeviceTensor dw(w, t), dx(x, t), dout(3 * 5 * 9, t);
  cuda::gemm_strided_batched(false, false, 5, 9, 7, 1.0f, dw.data(), 7, 0, dx.data(), 9, 63, 0.0f, dout.data(), 9, 45,
                             3, t);
  Tensor ref2 = Tensor::empty({3, 5, 9});
  for (int64_t i = 0; i < 3; ++i)
    ops::cpu::gemm(false, false, 5, 9, 7, 1.0f, w.data(), 7, x.data() + i * 63, 9, 0.0f, ref2.data() + i * 45, 9);
  CHECK(rel_l2(dout.to_host({3, 5, 9}), ref2) < 1e-5);
}
