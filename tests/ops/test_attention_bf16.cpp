// Attention in bfloat16 compute (AttentionArgs::compute = bfloat16, CPU):
// the scaled queries, keys, values and probabilities rounded to bfloat16,
// exact products, float32 sums and softmax. Three paths compute it: the
// tile kernel's AVX512-BF16 micro-kernels, oneDNN's matmuls (the choice
// where oneDNN has AMX; attention_onednn.cpp) and the emulation in the
// float32 tiles; the test hooks (Bf16Hooks) force each.
// - Over one key chunk (<= 256 keys for the tile kernel) the running max is
//   the row's max, so a double loop over the rounded operands, rounding each
//   probability as the kernels do, is the exact reference: checked on every
//   path, and float32 attention is shown to differ from it (so the rounding
//   really happens). The matmul path takes up to 2048 keys in one chunk:
//   checked there on odd sizes (queries and keys not multiples of its
//   blocks, d = 64 and 128), key counts and a score bias, with operands read
//   out of a fused projection.
// - Over many chunks (the matmul path's chunk and query pass forced small),
//   with odd head sizes, key counts, a score bias and the log-sum-exp, the
//   paths agree (they differ only in summation order and where the online
//   softmax rounds), and stay near the reference and the float32 result.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/math/activations.h"
#include "ops/attention_operands.h"
#include "ops/cpu/attention_onednn.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "ops/test_helpers.h"
#include "tensor/half.h"

using namespace ditgen;
using testing::random_tensor;
using testing::rel_l2;

namespace {

float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// One chunk of keys: softmax over rounded scores (+ bias), probabilities
// rounded after exp(s - max) as the kernels round them (fast_exp, as their
// softmax), the denominator of the unrounded float32 ones; sample b over its
// first lens[b] keys.
std::vector<double> reference_bf16(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale,
                                   const std::vector<int32_t>* lens = nullptr, const Tensor* bias = nullptr) {
  const int64_t bsz = q.dim(0), nq = q.dim(1), inner = q.dim(2), nk = k.dim(1), d = inner / heads;
  std::vector<double> out(bsz * nq * inner, 0.0);
  for (int64_t b = 0; b < bsz; ++b) {
    const int64_t keys = lens ? (*lens)[b] : nk;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<float> s(keys);
        float m = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(bf(q[(b * nq + i) * inner + h * d + e] * scale)) * bf(k[(b * nk + j) * inner + h * d + e]);
          s[j] = static_cast<float>(dot);
          if (bias) s[j] += (*bias)[(h * nq + i) * nk + j];
          m = std::max(m, s[j]);
        }
        double sum = 0;
        std::vector<double> p(keys);
        for (int64_t j = 0; j < keys; ++j) {
          const float w = math::fast_exp(s[j] - m);
          sum += w;
          p[j] = bf(w);
        }
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j) acc += p[j] * bf(v[(b * nk + j) * inner + h * d + e]);
          out[(b * nq + i) * inner + h * d + e] = acc / sum;
        }
      }
  }
  return out;
}

// The paths, as the test hooks choose them.
enum class Path { kTiles, kMatmul, kEmulated };
std::string path_name(Path p) { return p == Path::kTiles ? "tiles" : p == Path::kMatmul ? "matmul" : "emulated"; }
ops::cpu::Bf16Hooks hooks_for(Path p) {
  ops::cpu::Bf16Hooks h;
  h.emulate = p == Path::kEmulated;
  h.attention = p == Path::kMatmul ? ops::cpu::Bf16AttentionKernel::kMatmul : ops::cpu::Bf16AttentionKernel::kTiles;
  return h;
}

// Extras of one call: key counts, a bias (heads, q_len, kv_len), the lse.
struct Extras {
  const std::vector<int32_t>* lens = nullptr;
  const Tensor* bias = nullptr;
  Tensor* lse = nullptr;
};

Tensor run_rows(const ops::TokenRows& q, const ops::TokenRows& k, const ops::TokenRows& v, Shape out_shape,
                int64_t bsz, int64_t heads, DType compute, const ops::cpu::Bf16Hooks& hooks, const Extras& x = {}) {
  const int64_t inner = out_shape[2];
  Tensor out = Tensor::empty(out_shape);
  ops::AttentionArgs a = ops::attention_args(q, k, v, ops::rows_of(out), bsz, heads, inner / heads);
  a.compute = compute;
  if (x.lens) a.kv_lens = x.lens->data();
  if (x.bias) {
    a.bias = x.bias->data();
    a.bias_head_stride = q.len * k.len;
    a.bias_row_stride = k.len;
  }
  if (x.lse) a.lse = x.lse->data();
  ops::cpu::set_bf16_hooks(hooks);
  ops::attention(a);
  ops::cpu::set_bf16_hooks({});
  return out;
}

Tensor run(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, DType compute,
           const ops::cpu::Bf16Hooks& hooks, const Extras& x = {}) {
  return run_rows(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), q.shape(), q.dim(0), heads, compute, hooks, x);
}

// q attending to itself, one sample (1, n, heads * d), in `compute`.
ops::AttentionArgs self_attention_args(const Tensor& q, Tensor& out, int64_t heads, DType compute) {
  ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(q), ops::rows_of(q), ops::rows_of(out), 1,
                                             heads, q.dim(2) / heads);
  a.compute = compute;
  return a;
}

}  // namespace

TEST_CASE("bfloat16 attention over one key chunk equals a loop over the rounded operands") {
  struct Case {
    int64_t bsz, heads, q_len, kv_len, d;
  };
  for (const Case& c : {Case{2, 3, 37, 200, 72}, Case{1, 2, 70, 256, 64}, Case{3, 1, 5, 13, 9}, Case{1, 4, 1, 1, 16},
                        Case{2, 2, 45, 130, 128}}) {
    CAPTURE(c.kv_len);
    CAPTURE(c.d);
    const int64_t inner = c.heads * c.d;
    const Tensor q = random_tensor({c.bsz, c.q_len, inner}, 61, -2, 2);
    const Tensor k = random_tensor({c.bsz, c.kv_len, inner}, 62, -2, 2);
    const Tensor v = random_tensor({c.bsz, c.kv_len, inner}, 63, -2, 2);
    const std::vector<double> want = reference_bf16(q, k, v, c.heads, 1.0f / std::sqrt(float(c.d)));
    // Summation order moves a float32 score by an ulp and so, now and then,
    // a probability across a bfloat16 rounding boundary: 1e-5..5e-5 here,
    // where not rounding the probabilities at all gives > 5e-4.
    for (Path p : {Path::kTiles, Path::kMatmul, Path::kEmulated}) {
      const std::string path = path_name(p);
      CAPTURE(path);
      CHECK(rel_l2(run(q, k, v, c.heads, DType::kBF16, hooks_for(p)), want) < 1e-4);
    }
    if (c.kv_len > 1) CHECK(rel_l2(run(q, k, v, c.heads, DType::kF32, {}), want) > 5e-4);  // rounding shows
  }
}

TEST_CASE("bfloat16 attention on oneDNN's matmuls: one chunk of up to 2048 keys, key counts, a bias, fused rows") {
  struct Case {
    int64_t bsz, heads, q_len, kv_len, d;
  };
  for (const Case& c : {Case{2, 2, 300, 700, 128}, Case{3, 3, 97, 1100, 64}, Case{1, 1, 260, 2048, 64}}) {
    CAPTURE(c.q_len);
    CAPTURE(c.kv_len);
    CAPTURE(c.d);
    const int64_t inner = c.heads * c.d, n = std::max(c.q_len, c.kv_len);
    // q, k, v as column blocks of one fused (B, n, 3 * inner) projection, as
    // the models pass them; the reference reads dense copies.
    const Tensor qkv = random_tensor({c.bsz, n, 3 * inner}, 81, -2, 2);
    auto part = [&](int64_t t, int64_t len) {
      Tensor x = Tensor::empty({c.bsz, len, inner});
      for (int64_t b = 0; b < c.bsz; ++b)
        for (int64_t i = 0; i < len; ++i)
          for (int64_t e = 0; e < inner; ++e) x[(b * len + i) * inner + e] = qkv[(b * n + i) * 3 * inner + t * inner + e];
      return x;
    };
    const Tensor q = part(0, c.q_len), k = part(1, c.kv_len), v = part(2, c.kv_len);
    const Tensor bias = random_tensor({c.heads, c.q_len, c.kv_len}, 82, -1, 1);
    std::vector<int32_t> lens(c.bsz, static_cast<int32_t>(c.kv_len));
    lens[0] = static_cast<int32_t>(c.kv_len / 3 + 1);
    const float scale = 1.0f / std::sqrt(float(c.d));
    ops::TokenRows qr = ops::rows_of(qkv, 0, 3 * inner, c.q_len), kr = ops::rows_of(qkv, inner, 3 * inner, c.kv_len),
                   vr = ops::rows_of(qkv, 2 * inner, 3 * inner, c.kv_len);
    qr.batch_stride = kr.batch_stride = vr.batch_stride = n * 3 * inner;
    const Tensor plain = run_rows(qr, kr, vr, q.shape(), c.bsz, c.heads, DType::kBF16, hooks_for(Path::kMatmul));
    CHECK(rel_l2(plain, reference_bf16(q, k, v, c.heads, scale)) < 1e-4);
    const Tensor extras = run_rows(qr, kr, vr, q.shape(), c.bsz, c.heads, DType::kBF16, hooks_for(Path::kMatmul),
                                   Extras{&lens, &bias});
    CHECK(rel_l2(extras, reference_bf16(q, k, v, c.heads, scale, &lens, &bias)) < 1e-4);
  }
}

TEST_CASE("bfloat16 attention: the paths agree over many chunks, with key counts, a bias and the lse") {
  const int64_t bsz = 3, heads = 2, q_len = 75, kv_len = 600, d = 33, inner = heads * d;
  const Tensor q = random_tensor({bsz, q_len, inner}, 71, -2, 2);
  const Tensor k = random_tensor({bsz, kv_len, inner}, 72, -2, 2);
  const Tensor v = random_tensor({bsz, kv_len, inner}, 73, -2, 2);
  const Tensor bias = random_tensor({heads, q_len, kv_len}, 74, -1, 1);
  const std::vector<int32_t> lens = {600, 257, 31};
  const std::vector<double> want = reference_bf16(q, k, v, heads, 1.0f / std::sqrt(float(d)), &lens, &bias);
  Tensor lse_n = Tensor::empty({bsz, heads, q_len}), lse_e = lse_n.clone(), lse_f = lse_n.clone();
  const Tensor native = run(q, k, v, heads, DType::kBF16, hooks_for(Path::kTiles), {&lens, &bias, &lse_n});
  const Tensor emulated = run(q, k, v, heads, DType::kBF16, hooks_for(Path::kEmulated), {&lens, &bias, &lse_e});
  const Tensor f32 = run(q, k, v, heads, DType::kF32, {}, {&lens, &bias, &lse_f});
  CHECK(rel_l2(native, emulated) < 1e-5);
  CHECK(rel_l2(lse_n, lse_e) < 1e-6);
  CHECK(rel_l2(native, want) < 2e-3);
  const double err = rel_l2(native, f32);
  MESSAGE("bfloat16 against float32 attention: relative L2 " << err);
  CHECK(err < 1e-2);
  CHECK(err > 1e-4);
  CHECK(rel_l2(lse_n, lse_f) < 1e-3);
  // The matmul path in one chunk (the reference's softmax, up to summation
  // order; the tile kernel's chunks of 256 keys round differently), and in
  // chunks of 100 keys (the last one short, sample 2's 31 keys in one) over
  // passes of 40 queries.
  for (int64_t chunk : {0, 100}) {
    CAPTURE(chunk);
    ops::cpu::Bf16Hooks hooks = hooks_for(Path::kMatmul);
    hooks.attention_key_chunk = chunk;
    hooks.attention_query_rows = chunk ? 40 : 0;
    Tensor lse_m = lse_n.clone();
    const Tensor matmul = run(q, k, v, heads, DType::kBF16, hooks, {&lens, &bias, &lse_m});
    CHECK(rel_l2(matmul, native) < 2e-3);
    CHECK(rel_l2(matmul, want) < (chunk ? 2e-3 : 1e-4));
    CHECK(rel_l2(lse_m, lse_n) < 1e-6);
  }
}

TEST_CASE("bfloat16 attention: the kernel the hooks force, and oneDNN's only where its bfloat16 matmul is fast") {
  const Tensor q = random_tensor({1, 256, 128}, 1);
  Tensor out = Tensor::empty({1, 256, 128});
  ops::AttentionArgs a = self_attention_args(q, out, 2, DType::kBF16);
  ops::cpu::set_bf16_hooks(hooks_for(Path::kTiles));
  CHECK_FALSE(ops::cpu::attention_uses_onednn(a));
  ops::cpu::set_bf16_hooks(hooks_for(Path::kEmulated));
  CHECK_FALSE(ops::cpu::attention_uses_onednn(a));
  ops::cpu::set_bf16_hooks(hooks_for(Path::kMatmul));
  CHECK(ops::cpu::attention_uses_onednn(a));
  ops::cpu::set_bf16_hooks({});
  const bool automatic = ops::cpu::attention_uses_onednn(a);
  MESSAGE("bfloat16 attention here runs on " << std::string(automatic ? "oneDNN's matmuls (AMX)" : "the tile kernel"));
  if (!ops::cpu::onednn_fast(DType::kBF16)) CHECK_FALSE(automatic);
  a.compute = DType::kF32;
  CHECK_FALSE(ops::cpu::attention_uses_onednn(a));
}

TEST_CASE("attention rejects a compute dtype other than float32 and bfloat16") {
  const Tensor q = random_tensor({1, 4, 8}, 1);
  Tensor out = Tensor::empty({1, 4, 8});
  const ops::AttentionArgs a = self_attention_args(q, out, 1, DType::kF16);
  CHECK_THROWS_AS(ops::attention(a), std::invalid_argument);
}
