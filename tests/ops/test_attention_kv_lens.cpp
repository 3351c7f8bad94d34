// Per-sample key counts (AttentionArgs::kv_lens): sample b attends to its
// first kv_lens[b] keys only, in the output and in the log-sum-exp, against
// a plain double loop over those keys and against attention over the
// truncated keys alone (bit for bit: the same loop). Also the struct
// builder (ops/attention_operands.h) and the front end's argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "ops/test_helpers.h"

using namespace ditgen;
using testing::random_tensor;
using testing::rel_l2;

namespace {

// softmax(q k^T * scale) v over the first lens[b] keys of sample b, in
// double; out (B, q_len, heads*d), lse (B, heads, q_len).
void reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale,
               const std::vector<int32_t>& lens, std::vector<double>& out, std::vector<double>& lse) {
  const int64_t bsz = q.dim(0), nq = q.dim(1), inner = q.dim(2), nk = k.dim(1), d = inner / heads;
  out.assign(bsz * nq * inner, 0.0);
  lse.assign(bsz * heads * nq, 0.0);
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<double> s(lens[b]);
        double m = -1e300;
        for (int64_t j = 0; j < lens[b]; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(q[(b * nq + i) * inner + h * d + e]) * k[(b * nk + j) * inner + h * d + e];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - m));
        lse[(b * heads + h) * nq + i] = m + std::log(sum);
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < lens[b]; ++j) acc += s[j] * v[(b * nk + j) * inner + h * d + e];
          out[(b * nq + i) * inner + h * d + e] = acc / sum;
        }
      }
}

double rel_l2_vec(const Tensor& got, const std::vector<double>& ref) { return rel_l2(got, ref); }

}  // namespace

TEST_CASE("attention with per-sample key counts uses only each sample's first kv_lens[b] keys") {
  struct Case {
    int64_t heads, q_len, kv_len, d;
    std::vector<int32_t> lens;
  };
  // Odd sizes: key counts inside, at and past the key chunk (256) and micro-tile (8) boundaries.
  for (const Case& c : {Case{3, 37, 300, 72, {300, 1, 257, 9}}, Case{2, 5, 13, 8, {7, 13, 1}},
                        Case{1, 70, 600, 24, {256, 599}}, Case{4, 1, 3, 16, {2}}}) {
    const int64_t bsz = static_cast<int64_t>(c.lens.size()), inner = c.heads * c.d;
    CAPTURE(c.kv_len);
    Tensor q = random_tensor({bsz, c.q_len, inner}, 31, -2, 2);
    Tensor k = random_tensor({bsz, c.kv_len, inner}, 32, -2, 2), v = random_tensor({bsz, c.kv_len, inner}, 33, -2, 2);
    std::vector<double> ref, ref_lse;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    reference(q, k, v, c.heads, scale, c.lens, ref, ref_lse);
    for (bool with_lse : {false, true}) {
      CAPTURE(with_lse);
      Tensor out = Tensor::empty({bsz, c.q_len, inner}), lse = Tensor::empty({bsz, c.heads, c.q_len});
      ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(out),
                                                 bsz, c.heads, c.d);
      a.kv_lens = c.lens.data();
      if (with_lse) a.lse = lse.data();
      ops::attention(a);
      CHECK(rel_l2_vec(out, ref) < 1e-5);
      if (with_lse) CHECK(rel_l2_vec(lse, ref_lse) < 1e-6);
      // Sample by sample, the bits of attention over the truncated keys alone.
      for (int64_t b = 0; b < bsz; ++b) {
        const int64_t len = c.lens[b];
        Tensor qb = Tensor::empty({1, c.q_len, inner}), kb = Tensor::empty({1, len, inner}),
               vb = Tensor::empty({1, len, inner});
        std::memcpy(qb.data(), q.data() + b * c.q_len * inner, qb.numel() * sizeof(float));
        std::memcpy(kb.data(), k.data() + b * c.kv_len * inner, kb.numel() * sizeof(float));
        std::memcpy(vb.data(), v.data() + b * c.kv_len * inner, vb.numel() * sizeof(float));
        Tensor ob = Tensor::empty({1, c.q_len, inner}), lb = Tensor::empty({1, c.heads, c.q_len});
        ops::AttentionArgs t = ops::attention_args(ops::rows_of(qb), ops::rows_of(kb), ops::rows_of(vb),
                                                   ops::rows_of(ob), 1, c.heads, c.d);
        t.lse = lb.data();
        ops::attention(t);
        CHECK(std::memcmp(ob.data(), out.data() + b * c.q_len * inner, ob.numel() * sizeof(float)) == 0);
        if (with_lse)
          CHECK(std::memcmp(lb.data(), lse.data() + b * c.heads * c.q_len, lb.numel() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("kv_lens all equal to kv_len gives the bits of no kv_lens") {
  const int64_t bsz = 2, heads = 2, nq = 29, nk = 41, d = 12, inner = heads * d;
  Tensor q = random_tensor({bsz, nq, inner}, 41), k = random_tensor({bsz, nk, inner}, 42),
         v = random_tensor({bsz, nk, inner}, 43);
  Tensor a_out = Tensor::empty({bsz, nq, inner}), b_out = Tensor::empty({bsz, nq, inner});
  ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(a_out),
                                             bsz, heads, d);
  ops::attention(a);
  const std::vector<int32_t> lens = {nk, nk};
  a.kv_lens = lens.data();
  a.out = b_out.data();
  ops::attention(a);
  CHECK(std::memcmp(a_out.data(), b_out.data(), a_out.numel() * sizeof(float)) == 0);
}

TEST_CASE("attention rejects kv_lens outside [1, kv_len]") {
  Tensor q = Tensor::zeros({2, 3, 8}), k = Tensor::zeros({2, 5, 8}), out = Tensor::zeros({2, 3, 8});
  ops::AttentionArgs a =
      ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(k), ops::rows_of(out), 2, 2, 4);
  for (std::vector<int32_t> bad : {std::vector<int32_t>{0, 5}, {5, 6}, {-1, 1}}) {
    a.kv_lens = bad.data();
    CHECK_THROWS_AS(ops::attention(a), std::invalid_argument);
  }
}

TEST_CASE("attention_args: strides from token rows, scale, and checked bounds") {
  Tensor qkv = Tensor::zeros({2, 7, 3 * 12}), out = Tensor::zeros({2, 7, 12});
  const ops::AttentionArgs a = ops::attention_args(ops::rows_of(qkv, 0, 36, 7), ops::rows_of(qkv, 12, 36, 7),
                                                   ops::rows_of(qkv, 24, 36, 7), ops::rows_of(out), 2, 3, 4);
  CHECK(a.q == qkv.data());
  CHECK(a.k == qkv.data() + 12);
  CHECK(a.v == qkv.data() + 24);
  CHECK(a.out == out.data());
  CHECK(a.q_row_stride == 36);
  CHECK(a.k_batch_stride == 7 * 36);
  CHECK(a.out_row_stride == 12);
  CHECK(a.out_batch_stride == 7 * 12);
  CHECK(a.q_len == 7);
  CHECK(a.kv_len == 7);
  CHECK(a.scale == doctest::Approx(0.5f));
  CHECK(a.kv_lens == nullptr);
  CHECK(a.lse == nullptr);
  // v's last row would run past the buffer from column 25.
  CHECK_THROWS_AS(ops::attention_args(ops::rows_of(qkv, 0, 36, 7), ops::rows_of(qkv, 12, 36, 7),
                                      ops::rows_of(qkv, 25, 36, 7), ops::rows_of(out), 2, 3, 4),
                  std::invalid_argument);
  // q and out with different token counts; a row stride below heads * head_dim.
  CHECK_THROWS_AS(ops::attention_args(ops::rows_of(qkv, 0, 36, 6), ops::rows_of(qkv, 12, 36, 7),
                                      ops::rows_of(qkv, 24, 36, 7), ops::rows_of(out), 2, 3, 4),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::attention_args(ops::rows_of(out), ops::rows_of(out), ops::rows_of(out), ops::rows_of(out), 2,
                                      4, 4),
                  std::invalid_argument);
}
