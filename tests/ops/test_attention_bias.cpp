// The additive score bias of attention (AttentionArgs::bias, T5's relative
// position bias, with T5's scale 1): softmax(scale * q k^T + bias) v against
// a plain double loop, on odd shapes crossing the CPU kernel's query tile
// (64), key chunk (256) and key micro-tile (8), with strided and broadcast
// bias tables, with and without per-sample key counts, with lse; and a zero
// bias gives the bits of no bias.
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

struct Bias {
  const float* table;
  int64_t head_stride, row_stride;
  float at(int64_t h, int64_t i, int64_t j) const { return table[h * head_stride + i * row_stride + j]; }
};

// softmax(q k^T * scale + bias) v over the first lens[b] keys of sample b
// (all kv_len without lens), in double; q, out (B, q_len, heads*d), k, v
// (B, kv_len, heads*d); out and lse (B, heads, q_len) as the op lays them.
void reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale, const Bias& bias,
               const int32_t* lens, std::vector<double>& out, std::vector<double>& lse) {
  const int64_t bsz = q.dim(0), nq = q.dim(1), inner = q.dim(2), nk = k.dim(1), d = inner / heads;
  out.assign(bsz * nq * inner, 0.0);
  lse.assign(bsz * heads * nq, 0.0);
  for (int64_t b = 0; b < bsz; ++b) {
    const int64_t keys = lens ? lens[b] : nk;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<double> s(keys);
        double m = -1e300;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(q[(b * nq + i) * inner + h * d + e]) * k[(b * nk + j) * inner + h * d + e];
          s[j] = dot * scale + bias.at(h, i, j);
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - m));
        lse[(b * heads + h) * nq + i] = m + std::log(sum);
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j) acc += s[j] * v[(b * nk + j) * inner + h * d + e];
          out[(b * nq + i) * inner + h * d + e] = acc / sum;
        }
      }
  }
}

struct Problem {
  int64_t batch, heads, q_len, kv_len, head_dim;
  Tensor q, k, v;
  Problem(int64_t batch_, int64_t heads_, int64_t q_len_, int64_t kv_len_, int64_t head_dim_)
      : batch(batch_), heads(heads_), q_len(q_len_), kv_len(kv_len_), head_dim(head_dim_),
        q(random_tensor({batch, q_len, heads * head_dim}, 51, -1, 1)),
        k(random_tensor({batch, kv_len, heads * head_dim}, 52, -1, 1)),
        v(random_tensor({batch, kv_len, heads * head_dim}, 53, -2, 2)) {}

  // T5's call: scale 1, the bias set by the caller after building the args.
  ops::AttentionArgs args(Tensor& out, Tensor* lse, const Bias* bias) {
    ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(out),
                                               batch, heads, head_dim);
    a.scale = 1.0f;
    if (lse) a.lse = lse->data();
    if (bias) {
      a.bias = bias->table;
      a.bias_head_stride = bias->head_stride;
      a.bias_row_stride = bias->row_stride;
    }
    return a;
  }
};

}  // namespace

TEST_CASE("attention with a score bias matches softmax(q k^T + bias) v in double, with kv_lens and lse") {
  struct Case {
    int64_t q_len, kv_len;
    std::vector<int32_t> lens;  // per sample (batch 2)
  };
  // Square (T5 self-attention), more keys than queries, several query tiles,
  // several key chunks; key counts inside and at the edges of those.
  const Case cases[] = {{23, 23, {23, 11}}, {23, 37, {1, 30}}, {70, 29, {29, 8}}, {130, 23, {9, 23}},
                        {19, 300, {300, 257}}, {67, 520, {256, 513}}};
  const int64_t batch = 2, heads = 5, d = 8, inner = heads * d;
  for (const Case& c : cases) {
    Problem p(batch, heads, c.q_len, c.kv_len, d);
    // A [heads, q_len, kv_len] table with padded rows and heads (strides not
    // tied to the sizes), and one row shared by every head and query.
    const int64_t row_stride = c.kv_len + 3, head_stride = (c.q_len + 1) * row_stride;
    const Tensor full_table = random_tensor({heads * head_stride}, 54, -4, 4);
    const Tensor one_row = random_tensor({c.kv_len}, 55, -4, 4);
    for (const Bias& bias : {Bias{full_table.data(), head_stride, row_stride}, Bias{one_row.data(), 0, 0}})
      for (bool with_lens : {false, true}) {
        CAPTURE(c.q_len);
        CAPTURE(c.kv_len);
        CAPTURE(bias.head_stride);
        CAPTURE(with_lens);
        std::vector<double> ref, ref_lse;
        const int32_t* lens = with_lens ? c.lens.data() : nullptr;
        reference(p.q, p.k, p.v, heads, 1.0f, bias, lens, ref, ref_lse);
        Tensor out = Tensor::empty({batch, c.q_len, inner}), lse = Tensor::empty({batch, heads, c.q_len});
        ops::AttentionArgs a = p.args(out, &lse, &bias);
        a.kv_lens = lens;
        ops::attention(a);
        CHECK(rel_l2(out, ref) < 1e-5);
        CHECK(rel_l2(lse, ref_lse) < 1e-6);

        // Without lse: the same output.
        Tensor out2 = Tensor::empty({batch, c.q_len, inner});
        ops::AttentionArgs a2 = p.args(out2, nullptr, &bias);
        a2.kv_lens = lens;
        ops::attention(a2);
        CHECK(std::memcmp(out2.data(), out.data(), out.numel() * sizeof(float)) == 0);

        // The bias matters: these tests would see it ignored.
        const Tensor zero_row = Tensor::zeros({c.kv_len});
        std::vector<double> unbiased, unbiased_lse;
        reference(p.q, p.k, p.v, heads, 1.0f, Bias{zero_row.data(), 0, 0}, lens, unbiased, unbiased_lse);
        CHECK(rel_l2(out, unbiased) > 1e-2);
      }
  }
}

TEST_CASE("attention with a zero score bias gives the bits of no bias") {
  Problem p(2, 5, 70, 300, 8);
  const std::vector<int32_t> lens = {300, 11};
  const Tensor zeros = Tensor::zeros({5 * 70 * 300});
  const Bias zero{zeros.data(), 70 * 300, 300};
  for (bool with_lens : {false, true}) {
    CAPTURE(with_lens);
    Tensor plain = Tensor::empty({2, 70, 40}), plain_lse = Tensor::empty({2, 5, 70});
    Tensor biased = Tensor::empty({2, 70, 40}), biased_lse = Tensor::empty({2, 5, 70});
    ops::AttentionArgs a = p.args(plain, &plain_lse, nullptr), b = p.args(biased, &biased_lse, &zero);
    a.kv_lens = b.kv_lens = with_lens ? lens.data() : nullptr;
    ops::attention(a);
    ops::attention(b);
    CHECK(std::memcmp(plain.data(), biased.data(), plain.numel() * sizeof(float)) == 0);
    CHECK(std::memcmp(plain_lse.data(), biased_lse.data(), plain_lse.numel() * sizeof(float)) == 0);
  }
}

TEST_CASE("attention with a score bias: partial results over key blocks merge by lse into the full one") {
  // Ring attention over a biased call: each block's bias starts at its first
  // key column, and the merged result is the one over all keys.
  Problem p(2, 5, 23, 40, 8);
  const int64_t row_stride = 40, head_stride = 23 * 40;
  const Tensor table = random_tensor({5 * head_stride}, 56, -4, 4);
  const Bias bias{table.data(), head_stride, row_stride};
  Tensor full = Tensor::empty({2, 23, 40}), full_lse = Tensor::empty({2, 5, 23});
  ops::attention(p.args(full, &full_lse, &bias));

  Tensor acc = Tensor::empty({2, 23, 40}), acc_lse = Tensor::empty({2, 5, 23});
  Tensor part = Tensor::empty({2, 23, 40}), part_lse = Tensor::empty({2, 5, 23});
  auto block = [&](int64_t k0, int64_t k1, Tensor& out, Tensor& lse) {
    ops::AttentionArgs a = p.args(out, &lse, &bias);
    a.k = p.k.data() + k0 * 40;
    a.v = p.v.data() + k0 * 40;
    a.kv_len = k1 - k0;
    a.bias = table.data() + k0;
    ops::attention(a);
  };
  block(0, 17, acc, acc_lse);
  block(17, 40, part, part_lse);
  ops::attention_merge_(acc, acc_lse, part, part_lse, 5);
  CHECK(rel_l2(acc, full) < 1e-5);
  CHECK(rel_l2(acc_lse, full_lse) < 1e-6);
}
