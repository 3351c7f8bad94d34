// Core CPU ops against plain double-precision loops on odd shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/math/activations.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

TEST_CASE("fast_exp matches std::exp over the float range") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.01337f) {
    double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(math::fast_exp(x) - ref) / ref);
  }
  CHECK(worst < 5e-7);
  CHECK(math::fast_exp(-std::numeric_limits<float>::infinity()) < 1e-37f);
  CHECK(std::isfinite(math::fast_exp(1000.0f)));
}

TEST_CASE("gelu_tanh and silu match their textbook formulas") {
  Tensor x = random_tensor({3, 1001}, 1, -9.0f, 9.0f);
  Tensor g = x.clone(), s = x.clone();
  ops::gelu_tanh_(g);
  ops::silu_(s);
  std::vector<double> gref(x.numel()), sref(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x[i];
    gref[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    sref[i] = v / (1 + std::exp(-v));
  }
  CHECK(rel_l2(g, gref) < 1e-6);
  CHECK(rel_l2(s, sref) < 1e-6);
}

TEST_CASE("gelu_ (exact) matches 0.5 x (1 + erf(x / sqrt 2)) in double") {
  Tensor x = random_tensor({3, 1001}, 5, -9.0f, 9.0f);
  Tensor g = x.clone();
  ops::gelu_(g);
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x[i], ref = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(g[i] - ref) / std::max(1.0, std::abs(ref)));
  }
  CHECK(worst < 1e-6);
  // Not the tanh approximation: they differ by up to ~5e-4 near |x| = 2.
  Tensor t = x.clone();
  ops::gelu_tanh_(t);
  double apart = 0;
  for (int64_t i = 0; i < x.numel(); ++i) apart = std::max(apart, std::abs(static_cast<double>(g[i]) - t[i]));
  CHECK(apart > 1e-4);
}

TEST_CASE("linear matches a plain loop (GEMM and GEMV paths)") {
  for (int64_t m : {1, 37}) {
    Tensor x = random_tensor({m, 53}, 2), w = random_tensor({29, 53}, 3), b = random_tensor({29}, 4);
    Tensor y = ops::linear(x, w, &b);
    std::vector<double> ref(m * 29);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < 29; ++j) {
        double acc = b[j];
        for (int64_t k = 0; k < 53; ++k) acc += static_cast<double>(x[i * 53 + k]) * w[j * 53 + k];
        ref[i * 29 + j] = acc;
      }
    CHECK(y.shape() == Shape{m, 29});
    CHECK(rel_l2(y, ref) < 1e-6);
  }
}

TEST_CASE("layer_norm and layer_norm_modulate match plain loops") {
  const int64_t b = 2, n = 7, c = 45;
  Tensor x = random_tensor({b, n, c}, 5, -3, 5);
  Tensor w = random_tensor({c}, 6), bias = random_tensor({c}, 7);
  Tensor mod = random_tensor({b, 3 * c}, 8);  // [shift | scale | gate] chunks, as adaLN emits
  Tensor y = ops::layer_norm(x, &w, &bias, 1e-5f);
  Tensor z = Tensor::empty(x.shape());
  ops::layer_norm_modulate(x, mod, 0, c, 1e-6f, z);
  std::vector<double> yref(x.numel()), zref(x.numel());
  for (int64_t r = 0; r < b * n; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mean += x[r * c + j];
    mean /= c;
    for (int64_t j = 0; j < c; ++j) var += (x[r * c + j] - mean) * (x[r * c + j] - mean);
    var /= c;
    const int64_t bi = r / n;
    for (int64_t j = 0; j < c; ++j) {
      yref[r * c + j] = (x[r * c + j] - mean) / std::sqrt(var + 1e-5) * w[j] + bias[j];
      double zn = (x[r * c + j] - mean) / std::sqrt(var + 1e-6);
      zref[r * c + j] = zn * (1 + mod[bi * 3 * c + c + j]) + mod[bi * 3 * c + j];
    }
  }
  CHECK(rel_l2(y, yref) < 1e-6);
  CHECK(rel_l2(z, zref) < 1e-6);
}

TEST_CASE("gated_residual_ adds gate[b] * y") {
  Tensor x = random_tensor({2, 3, 5}, 9), y = random_tensor({2, 3, 5}, 10), g = random_tensor({2, 11}, 11);
  Tensor ref = x.clone();
  ops::gated_residual_(x, y, g, 2);
  for (int64_t i = 0; i < 30; ++i) CHECK(x[i] == doctest::Approx(ref[i] + g[(i / 15) * 11 + 2 + i % 5] * y[i]));
}

// Reference attention: materialise softmax(QK^T * scale) V in double.
static std::vector<double> naive_attention(const ops::AttentionArgs& a) {
  const float* aq = static_cast<const float*>(a.q);
  const float* ak = static_cast<const float*>(a.k);
  const float* av = static_cast<const float*>(a.v);
  std::vector<double> out(a.batch * a.q_len * a.heads * a.head_dim);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.q_len; ++i) {
        std::vector<double> s(a.kv_len);
        double m = -1e300;
        for (int64_t j = 0; j < a.kv_len; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < a.head_dim; ++d)
            acc += static_cast<double>(aq[b * a.q_batch_stride + i * a.q_row_stride + h * a.head_dim + d]) *
                   ak[b * a.k_batch_stride + j * a.k_row_stride + h * a.head_dim + d];
          s[j] = acc * a.scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - m));
        for (int64_t d = 0; d < a.head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < a.kv_len; ++j)
            acc += s[j] * av[b * a.v_batch_stride + j * a.v_row_stride + h * a.head_dim + d];
          out[((b * a.q_len + i) * a.heads + h) * a.head_dim + d] = acc / sum;
        }
      }
  return out;
}

TEST_CASE("attention reads packed QKV rows and matches naive softmax attention") {
  // Odd sizes crossing the query tile (64), key chunk (256) and key micro-tile
  // (8) boundaries, head sizes that are not whole vectors, and VAE-sized heads.
  struct Case { int64_t batch, heads, q_len, kv_len, head_dim; };
  for (Case c : {Case{2, 3, 37, 300, 72}, Case{1, 1, 130, 5, 16}, Case{3, 12, 25, 25, 8}, Case{1, 2, 70, 13, 136},
                 Case{1, 1, 9, 600, 512}}) {
    const int64_t inner = c.heads * c.head_dim;
    Tensor q = random_tensor({c.batch, c.q_len, inner}, 12, -2, 2);
    Tensor kv = random_tensor({c.batch, c.kv_len, 2 * inner}, 13, -2, 2);  // [K | V] per token row
    Tensor out = Tensor::empty({c.batch, c.q_len, inner});
    ops::AttentionArgs a;
    a.q = q.data(), a.k = kv.data(), a.v = kv.data() + inner, a.out = out.data();
    a.batch = c.batch, a.heads = c.heads, a.q_len = c.q_len, a.kv_len = c.kv_len, a.head_dim = c.head_dim;
    a.q_row_stride = inner, a.k_row_stride = a.v_row_stride = 2 * inner, a.out_row_stride = inner;
    a.q_batch_stride = c.q_len * inner, a.k_batch_stride = a.v_batch_stride = c.kv_len * 2 * inner;
    a.out_batch_stride = c.q_len * inner;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    ops::attention(a);
    CHECK(rel_l2(out, naive_attention(a)) < 1e-5);
  }
}

TEST_CASE("attention over key blocks merged by log-sum-exp equals attention over all keys") {
  // Ring attention's building block: split the keys in three uneven blocks.
  const int64_t batch = 2, heads = 3, q_len = 11, kv_len = 29, d = 8, inner = heads * d;
  Tensor q = random_tensor({batch, q_len, inner}, 21, -2, 2), k = random_tensor({batch, kv_len, inner}, 22, -2, 2),
         v = random_tensor({batch, kv_len, inner}, 23, -2, 2);
  auto run = [&](int64_t k0, int64_t k1, Tensor& out, Tensor& lse) {
    ops::AttentionArgs a;
    a.q = q.data(), a.k = k.data() + k0 * inner, a.v = v.data() + k0 * inner, a.out = out.data(), a.lse = lse.data();
    a.batch = batch, a.heads = heads, a.q_len = q_len, a.kv_len = k1 - k0, a.head_dim = d;
    a.q_row_stride = a.k_row_stride = a.v_row_stride = a.out_row_stride = inner;
    a.q_batch_stride = a.out_batch_stride = q_len * inner;
    a.k_batch_stride = a.v_batch_stride = kv_len * inner;
    a.scale = 0.35f;
    ops::attention(a);
  };
  Tensor full = Tensor::empty({batch, q_len, inner}), full_lse = Tensor::empty({batch, heads, q_len});
  run(0, kv_len, full, full_lse);
  Tensor acc = Tensor::empty(full.shape()), acc_lse = Tensor::empty(full_lse.shape());
  Tensor part = Tensor::empty(full.shape()), part_lse = Tensor::empty(full_lse.shape());
  run(0, 10, acc, acc_lse);
  for (auto [k0, k1] : {std::pair<int64_t, int64_t>{10, 13}, {13, kv_len}}) {
    run(k0, k1, part, part_lse);
    ops::attention_merge_(acc, acc_lse, part, part_lse, heads);
  }
  CHECK(rel_l2(acc, full) < 1e-6);
  CHECK(rel_l2(acc_lse, full_lse) < 1e-6);
  // lse itself against a plain loop for one row.
  double m = -1e300, sum = 0;
  std::vector<double> s(kv_len);
  for (int64_t j = 0; j < kv_len; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < d; ++e) dot += double(q[e]) * k[j * inner + e];
    s[j] = 0.35 * dot;
    m = std::max(m, s[j]);
  }
  for (double x : s) sum += std::exp(x - m);
  CHECK(full_lse[0] == doctest::Approx(m + std::log(sum)).epsilon(1e-5));
}

TEST_CASE("timestep_embedding follows diffusers get_timestep_embedding") {
  std::vector<float> t = {0.0f, 1.0f, 500.0f, 999.0f};
  const int64_t dim = 256, half = 128;
  Tensor e = ops::timestep_embedding(t, dim, /*flip*/ true, /*shift*/ 1.0f);
  std::vector<double> ref(t.size() * dim);
  for (size_t r = 0; r < t.size(); ++r)
    for (int64_t i = 0; i < half; ++i) {
      double arg = t[r] * std::exp(-std::log(10000.0) * i / (half - 1.0));
      ref[r * dim + i] = std::cos(arg);  // flip_sin_to_cos: cos first
      ref[r * dim + half + i] = std::sin(arg);
    }
  CHECK(rel_l2(e, ref) < 1e-5);
}

TEST_CASE("sincos_pos_embed_2d: first half encodes x, second half y") {
  // Non-square grid: positions are scaled by base_size / grid per axis.
  const int64_t dim = 16, gh = 3, gw = 5;
  Tensor e = ops::sincos_pos_embed_2d(dim, gh, gw, gh, 1.0);
  REQUIRE(e.shape() == Shape{15, 16});
  for (int64_t y = 0; y < gh; ++y)
    for (int64_t x = 0; x < gw; ++x)
      for (int64_t i = 0; i < 4; ++i) {
        double w = 1.0 / std::pow(10000.0, i / 4.0);
        const float* row = e.data() + (y * gw + x) * dim;
        const double px = x * 3.0 / 5.0;
        CHECK(row[i] == doctest::Approx(std::sin(px * w)));
        CHECK(row[4 + i] == doctest::Approx(std::cos(px * w)));
        CHECK(row[8 + i] == doctest::Approx(std::sin(y * w)));
        CHECK(row[12 + i] == doctest::Approx(std::cos(y * w)));
      }
}

TEST_CASE("patchify orders (c, i, j) in a patch, unpatchify inverts (i, j, c)") {
  Tensor x = random_tensor({2, 3, 6, 4}, 14);
  Tensor p = ops::patchify(x, 2);
  REQUIRE(p.shape() == Shape{2, 6, 12});
  // token (gy=1, gx=1) of image 1, channel 2, pixel (i=1, j=0)
  CHECK(p[(1 * 6 + 1 * 2 + 1) * 12 + 2 * 4 + 1 * 2 + 0] == x[((1 * 3 + 2) * 6 + 3) * 4 + 2]);
  // unpatchify expects (i, j, c) inside the patch: build such a tensor by hand.
  Tensor t = random_tensor({2, 6, 12}, 15);
  Tensor img = ops::unpatchify(t, 3, 2, 2, 3);
  REQUIRE(img.shape() == Shape{2, 3, 6, 4});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t yy = 0; yy < 6; ++yy)
        for (int64_t xx = 0; xx < 4; ++xx) {
          int64_t tok = (yy / 2) * 2 + xx / 2, i = yy % 2, j = xx % 2;
          CHECK(img[((n * 3 + c) * 6 + yy) * 4 + xx] == t[(n * 6 + tok) * 12 + (i * 2 + j) * 3 + c]);
        }
}
