// Attention in bfloat16 compute (AttentionArgs::compute = bfloat16, CPU):
// the scaled queries, keys, values and probabilities rounded to bfloat16,
// exact products, float32 sums and softmax.
// - Over one key chunk (<= 256 keys) the running max is the row's max, so a
//   double loop over the rounded operands, rounding each probability as
//   the kernel does, is the exact reference: checked on both paths (the
//   AVX512-BF16 micro-kernels where this CPU and build have them, and the
//   emulation in the float32 tiles), and float32 attention is shown to
//   differ from it (so the rounding really happens).
// - Over many chunks, with odd head sizes, key counts, a score bias and the
//   log-sum-exp, the two paths agree (they differ only in summation order)
//   and stay near the float32 result.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/math/activations.h"
#include "ops/attention_operands.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "ops/test_helpers.h"
#include "tensor/half.h"

using namespace ditgen;
using testing::random_tensor;
using testing::rel_l2;

namespace {

float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// One chunk of keys: softmax over rounded scores, probabilities rounded
// after exp(s - max) as the kernel rounds them (fast_exp, as its softmax),
// the denominator of the unrounded float32 ones.
std::vector<double> reference_bf16(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale) {
  const int64_t bsz = q.dim(0), nq = q.dim(1), inner = q.dim(2), nk = k.dim(1), d = inner / heads;
  std::vector<double> out(bsz * nq * inner, 0.0);
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<float> s(nk);
        float m = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(bf(q[(b * nq + i) * inner + h * d + e] * scale)) * bf(k[(b * nk + j) * inner + h * d + e]);
          s[j] = static_cast<float>(dot);
          m = std::max(m, s[j]);
        }
        double sum = 0;
        std::vector<double> p(nk);
        for (int64_t j = 0; j < nk; ++j) {
          const float w = math::fast_exp(s[j] - m);
          sum += w;
          p[j] = bf(w);
        }
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < nk; ++j) acc += p[j] * bf(v[(b * nk + j) * inner + h * d + e]);
          out[(b * nq + i) * inner + h * d + e] = acc / sum;
        }
      }
  return out;
}

Tensor run(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, DType compute, bool emulate,
           const std::vector<int32_t>* lens = nullptr, const Tensor* bias = nullptr, Tensor* lse = nullptr) {
  const int64_t bsz = q.dim(0), inner = q.dim(2);
  Tensor out = Tensor::empty(q.shape());
  ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(out), bsz,
                                             heads, inner / heads);
  a.compute = compute;
  if (lens) a.kv_lens = lens->data();
  if (bias) {
    a.bias = bias->data();
    a.bias_head_stride = q.dim(1) * k.dim(1);
    a.bias_row_stride = k.dim(1);
  }
  if (lse) a.lse = lse->data();
  ops::cpu::set_bf16_hooks({emulate, 0});
  ops::attention(a);
  ops::cpu::set_bf16_hooks({});
  return out;
}

}  // namespace

TEST_CASE("bfloat16 attention over one key chunk equals a loop over the rounded operands") {
  struct Case {
    int64_t bsz, heads, q_len, kv_len, d;
  };
  for (const Case& c : {Case{2, 3, 37, 200, 72}, Case{1, 2, 70, 256, 64}, Case{3, 1, 5, 13, 9}, Case{1, 4, 1, 1, 16}}) {
    CAPTURE(c.kv_len);
    CAPTURE(c.d);
    const int64_t inner = c.heads * c.d;
    const Tensor q = random_tensor({c.bsz, c.q_len, inner}, 61, -2, 2);
    const Tensor k = random_tensor({c.bsz, c.kv_len, inner}, 62, -2, 2);
    const Tensor v = random_tensor({c.bsz, c.kv_len, inner}, 63, -2, 2);
    const std::vector<double> want = reference_bf16(q, k, v, c.heads, 1.0f / std::sqrt(float(c.d)));
    for (bool emulate : {false, true}) {
      CAPTURE(emulate);
      CHECK(rel_l2(run(q, k, v, c.heads, DType::kBF16, emulate), want) < 2e-5);
    }
    if (c.kv_len > 1) CHECK(rel_l2(run(q, k, v, c.heads, DType::kF32, false), want) > 5e-4);  // rounding shows
  }
}

TEST_CASE("bfloat16 attention: both paths agree over many chunks, with key counts, a bias and the lse") {
  const int64_t bsz = 3, heads = 2, q_len = 75, kv_len = 600, d = 33, inner = heads * d;
  const Tensor q = random_tensor({bsz, q_len, inner}, 71, -2, 2);
  const Tensor k = random_tensor({bsz, kv_len, inner}, 72, -2, 2);
  const Tensor v = random_tensor({bsz, kv_len, inner}, 73, -2, 2);
  const Tensor bias = random_tensor({heads, q_len, kv_len}, 74, -1, 1);
  const std::vector<int32_t> lens = {600, 257, 31};
  Tensor lse_n = Tensor::empty({bsz, heads, q_len}), lse_e = lse_n.clone(), lse_f = lse_n.clone();
  const Tensor native = run(q, k, v, heads, DType::kBF16, false, &lens, &bias, &lse_n);
  const Tensor emulated = run(q, k, v, heads, DType::kBF16, true, &lens, &bias, &lse_e);
  const Tensor f32 = run(q, k, v, heads, DType::kF32, false, &lens, &bias, &lse_f);
  CHECK(rel_l2(native, emulated) < 1e-5);
  CHECK(rel_l2(lse_n, lse_e) < 1e-6);
  const double err = rel_l2(native, f32);
  MESSAGE("bfloat16 against float32 attention: relative L2 " << err);
  CHECK(err < 1e-2);
  CHECK(err > 1e-4);
  CHECK(rel_l2(lse_n, lse_f) < 1e-3);
}

TEST_CASE("attention rejects a compute dtype other than float32 and bfloat16") {
  const Tensor q = random_tensor({1, 4, 8}, 1);
  Tensor out = Tensor::empty({1, 4, 8});
  ops::AttentionArgs a =
      ops::attention_args(ops::rows_of(q), ops::rows_of(q), ops::rows_of(q), ops::rows_of(out), 1, 1, 8);
  a.compute = DType::kF16;
  CHECK_THROWS_AS(ops::attention(a), std::invalid_argument);
}
