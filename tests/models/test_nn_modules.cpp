// The modules of models/nn/ on their own, against plain loops: the parts
// no shipped family uses yet (q/k norms per head and across heads, the
// rotary hook, the gated feed-forward, the norm before a cross-attention)
// and the tensor declarations every model is validated and counted from
// (their legacy names and other stored shapes included). The families
// exercise the rest through their parity tests (the VAE and T5 modules
// through AutoencoderKL's, Wan's and CogVideoX's VAEs and the T5 encoders).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "models/nn/attention.h"
#include "models/nn/feed_forward.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/transformer_block.h"
#include "models/nn/upsample_conv.h"
#include "parallel/sequence_attention.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

// A store holding `tensors`, for the lifetime of the TempDir.
io::WeightStore store_of(const testing::TempDir& dir, const Named& tensors) {
  io::write_safetensors(dir.file("model.safetensors"), tensors, {});
  return io::WeightStore::open_dir(dir.path.string());
}

// y (R, N) = x (R, K) w^T + b.
std::vector<float> linear_ref(const std::vector<float>& x, const Tensor& w, const Tensor& b) {
  const int64_t n = w.dim(0), k = w.dim(1), rows = static_cast<int64_t>(x.size()) / k;
  std::vector<float> y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < n; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x[r * k + i]) * w[o * k + i];
      y[r * n + o] = static_cast<float>(s);
    }
  return y;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

// Each row of `width` normalised: RMSNorm (bias empty) or LayerNorm, times weight (+ bias).
void norm_ref(std::vector<float>& x, int64_t width, const Tensor& weight, const Tensor* bias, float eps) {
  for (size_t r = 0; r < x.size() / width; ++r) {
    float* row = x.data() + r * width;
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < width; ++i) mean += row[i];
    mean = bias ? mean / width : 0;
    for (int64_t i = 0; i < width; ++i) sq += (row[i] - mean) * (row[i] - mean);
    const double inv = 1 / std::sqrt(sq / width + eps);
    for (int64_t i = 0; i < width; ++i)
      row[i] = static_cast<float>((row[i] - mean) * inv * weight[i] + (bias ? (*bias)[i] : 0));
  }
}

// Softmax attention per head: q (B, P, H*hd) against k, v (B, M, H*hd), the
// first lens[b] keys of sample b.
std::vector<float> attention_ref(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                 int64_t bsz, int64_t heads, int64_t hd, const std::vector<int64_t>& lens) {
  const int64_t c = heads * hd, p = static_cast<int64_t>(q.size()) / (bsz * c);
  const int64_t m = static_cast<int64_t>(k.size()) / (bsz * c);
  std::vector<float> out(q.size());
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < p; ++i) {
        std::vector<double> s(static_cast<size_t>(lens[b]));
        double top = -1e300, sum = 0;
        for (int64_t j = 0; j < lens[b]; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += q[(b * p + i) * c + h * hd + e] * k[(b * m + j) * c + h * hd + e];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          top = std::max(top, s[j]);
        }
        for (double& x : s) sum += (x = std::exp(x - top));
        for (int64_t e = 0; e < hd; ++e) {
          double o = 0;
          for (int64_t j = 0; j < lens[b]; ++j) o += s[j] / sum * v[(b * m + j) * c + h * hd + e];
          out[(b * p + i) * c + h * hd + e] = static_cast<float>(o);
        }
      }
  return out;
}

double rel_l2(const Tensor& got, const std::vector<float>& ref) {
  return testing::rel_l2(got.data(), ref.data(), got.numel());
}

// The tensors of an attention under "a.": random projections, norms near 1.
Named attention_weights(const models::nn::AttentionDims& d, int64_t norm_width, bool norm_bias, uint32_t seed) {
  const int64_t inner = d.inner();
  Named t;
  for (const char* p : {"to_q", "to_k", "to_v"}) {
    const int64_t in = std::string(p) == "to_q" ? d.query_dim : d.context_dim;
    t.push_back({std::string("a.") + p + ".weight", testing::random_tensor({inner, in}, seed++, -0.5f, 0.5f)});
    t.push_back({std::string("a.") + p + ".bias", testing::random_tensor({inner}, seed++, -0.5f, 0.5f)});
  }
  t.push_back({"a.to_out.0.weight", testing::random_tensor({d.query_dim, inner}, seed++, -0.5f, 0.5f)});
  t.push_back({"a.to_out.0.bias", testing::random_tensor({d.query_dim}, seed++, -0.5f, 0.5f)});
  for (const char* n : {"norm_q", "norm_k"}) {
    t.push_back({std::string("a.") + n + ".weight", testing::random_tensor({norm_width}, seed++, 0.5f, 1.5f)});
    if (norm_bias) t.push_back({std::string("a.") + n + ".bias", testing::random_tensor({norm_width}, seed++)});
  }
  return t;
}

const Tensor& named(const Named& t, const std::string& name) {
  for (const auto& [n, v] : t)
    if (n == name) return v;
  throw std::logic_error("no " + name);
}

}  // namespace

TEST_CASE("nn::Attention: q/k RMSNorm across heads and a rotary hook, self-attention") {
  using models::nn::AttentionDims;
  const int64_t bsz = 2, p = 5, heads = 3, hd = 4, d = heads * hd;
  const AttentionDims dims{heads, hd, d, d, models::nn::QkNorm::kRmsNorm, models::nn::QkNormSpan::kAcrossHeads, 1e-6f};
  testing::TempDir dir("nn_attention");
  const Named w = attention_weights(dims, d, false, 11);
  const auto store = store_of(dir, w);
  models::nn::check_tensors(store, models::nn::Attention::tensors("a.", dims));
  const auto attn = models::nn::Attention::load(store, "a.", dims, nullptr, {});
  const Tensor x = testing::random_tensor({bsz, p, d}, 3);
  const parallel::SequenceParallelAttention seq;
  const models::nn::AttentionCore core = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    seq.self_attention(q, k, v, hd, p, out);
  };
  // A stand-in for rotary positions: any in-place change of q and k, applied after the norms.
  const models::nn::Rotary rotary = [](Tensor& q, Tensor& k) {
    for (int64_t i = 0; i < q.numel(); ++i) q[i] *= 2.0f;
    for (int64_t i = 0; i < k.numel(); ++i) k[i] = -k[i];
  };
  const Tensor got = attn.self_attention(x, core, nullptr, &rotary);

  std::vector<float> q = linear_ref(values(x), named(w, "a.to_q.weight"), named(w, "a.to_q.bias"));
  std::vector<float> k = linear_ref(values(x), named(w, "a.to_k.weight"), named(w, "a.to_k.bias"));
  const std::vector<float> v = linear_ref(values(x), named(w, "a.to_v.weight"), named(w, "a.to_v.bias"));
  norm_ref(q, d, named(w, "a.norm_q.weight"), nullptr, 1e-6f);  // over all D = heads * head_dim
  norm_ref(k, d, named(w, "a.norm_k.weight"), nullptr, 1e-6f);
  for (float& e : q) e *= 2.0f;
  for (float& e : k) e = -e;
  const std::vector<float> o = attention_ref(q, k, v, bsz, heads, hd, {p, p});
  const std::vector<float> ref = linear_ref(o, named(w, "a.to_out.0.weight"), named(w, "a.to_out.0.bias"));
  CHECK(rel_l2(got, ref) < 1e-5);
}

TEST_CASE("nn::Attention: q/k LayerNorm per head, cross-attention with per-text key counts and repeats") {
  using models::nn::AttentionDims;
  const int64_t texts = 2, repeat = 2, p = 3, m = 6, heads = 2, hd = 8, d = 10, dc = 7;
  const AttentionDims dims{heads, hd, d, dc, models::nn::QkNorm::kLayerNorm, models::nn::QkNormSpan::kPerHead, 1e-5f};
  testing::TempDir dir("nn_cross");
  const Named w = attention_weights(dims, hd, true, 41);
  const auto store = store_of(dir, w);
  models::nn::check_tensors(store, models::nn::Attention::tensors("a.", dims));
  const auto attn = models::nn::Attention::load(store, "a.", dims, nullptr, {});
  const Tensor x = testing::random_tensor({texts * repeat, p, d}, 5), text = testing::random_tensor({texts, m, dc}, 6);
  const std::vector<int32_t> lens = {4, 6};
  const Tensor got = attn.cross_attention(x, {&text, lens.data(), repeat});

  std::vector<float> q = linear_ref(values(x), named(w, "a.to_q.weight"), named(w, "a.to_q.bias"));
  std::vector<float> k = linear_ref(values(text), named(w, "a.to_k.weight"), named(w, "a.to_k.bias"));
  const std::vector<float> v = linear_ref(values(text), named(w, "a.to_v.weight"), named(w, "a.to_v.bias"));
  norm_ref(q, hd, named(w, "a.norm_q.weight"), &named(w, "a.norm_q.bias"), 1e-5f);  // each head on its own
  norm_ref(k, hd, named(w, "a.norm_k.weight"), &named(w, "a.norm_k.bias"), 1e-5f);
  // Each text's `repeat` samples are one sequence of repeat * P queries.
  const std::vector<float> o = attention_ref(q, k, v, texts, heads, hd, {lens[0], lens[1]});
  const std::vector<float> ref = linear_ref(o, named(w, "a.to_out.0.weight"), named(w, "a.to_out.0.bias"));
  CHECK(rel_l2(got, ref) < 1e-5);
}

TEST_CASE("nn::FeedForward: the gated GELU (tanh) of the two halves of net.0, and the exact (erf) GELU") {
  const int64_t rows = 7, d = 6, f = 10;
  testing::TempDir dir("nn_ff");
  const Named w = {{"ff.net.0.proj.weight", testing::random_tensor({2 * f, d}, 1)},
                   {"ff.net.0.proj.bias", testing::random_tensor({2 * f}, 2)},
                   {"ff.net.2.weight", testing::random_tensor({d, f}, 3)},
                   {"ff.net.2.bias", testing::random_tensor({d}, 4)}};
  const auto store = store_of(dir, w);
  const models::nn::FeedForwardDims dims{d, f, models::nn::FeedForwardActivation::kGatedGeluTanh};
  models::nn::check_tensors(store, models::nn::FeedForward::tensors("ff.", dims));
  const auto ff = models::nn::FeedForward::load(store, "ff.", dims, nullptr, {});
  const Tensor x = testing::random_tensor({1, rows, d}, 9);
  const Tensor got = ff(x);

  const std::vector<float> both =
      linear_ref(values(x), named(w, "ff.net.0.proj.weight"), named(w, "ff.net.0.proj.bias"));
  std::vector<float> hidden(static_cast<size_t>(rows * f));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < f; ++i) {
      const double value = both[r * 2 * f + i], gate = both[r * 2 * f + f + i];
      const double gelu = 0.5 * gate * (1 + std::tanh(0.7978845608028654 * (gate + 0.044715 * gate * gate * gate)));
      hidden[r * f + i] = static_cast<float>(value * gelu);
    }
  CHECK(rel_l2(got, linear_ref(hidden, named(w, "ff.net.2.weight"), named(w, "ff.net.2.bias"))) < 1e-5);

  // The exact GELU (WanImageEmbedding's): net.0's first F rows, 0.5 v (1 + erf(v / sqrt 2)), then net.2.
  testing::TempDir plain_dir("nn_ff_gelu");
  const Named plain_w = {{"ff.net.0.proj.weight", testing::random_tensor({f, d}, 5)},
                         {"ff.net.0.proj.bias", testing::random_tensor({f}, 6)},
                         {"ff.net.2.weight", testing::random_tensor({d, f}, 7)},
                         {"ff.net.2.bias", testing::random_tensor({d}, 8)}};
  const auto plain_store = store_of(plain_dir, plain_w);
  const auto exact =
      models::nn::FeedForward::load(plain_store, "ff.", {d, f, models::nn::FeedForwardActivation::kGelu}, nullptr, {});
  std::vector<float> pre = linear_ref(values(x), named(plain_w, "ff.net.0.proj.weight"),
                                      named(plain_w, "ff.net.0.proj.bias"));
  for (float& v : pre) v = static_cast<float>(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  CHECK(rel_l2(exact(x), linear_ref(pre, named(plain_w, "ff.net.2.weight"), named(plain_w, "ff.net.2.bias"))) < 1e-6);
}

TEST_CASE("nn::TransformerBlock: the optional norm before the cross-attention") {
  using models::nn::AttentionDims;
  const int64_t bsz = 2, p = 4, m = 3, heads = 2, hd = 4, d = heads * hd;
  models::nn::TransformerBlockDims dims;
  dims.self = {heads, hd, d, d};
  dims.cross = {heads, hd, d, d};
  dims.cross_norm = true;
  dims.cross_norm_eps = 1e-5f;
  dims.ff = {d, 2 * d, models::nn::FeedForwardActivation::kGeluTanh};
  Named w;
  uint32_t seed = 100;
  for (const auto& decl : models::nn::TransformerBlock::tensors("b.", dims))
    w.push_back({decl.name, testing::random_tensor(decl.shape, seed++, -0.3f, 0.3f)});
  testing::TempDir dir("nn_block");
  const auto store = store_of(dir, w);
  models::nn::check_tensors(store, models::nn::TransformerBlock::tensors("b.", dims));
  const auto block = models::nn::TransformerBlock::load(store, "b.", dims, {}, {});
  models::nn::TransformerBlockDims plain = dims;
  plain.cross_norm = false;
  const auto without = models::nn::TransformerBlock::load(store, "b.", plain, {}, {});

  const Tensor x = testing::random_tensor({bsz, p, d}, 1), text = testing::random_tensor({bsz, m, d}, 2);
  const Tensor mod = Tensor::zeros({bsz, 6 * d});  // no shift, no scale, no gate: only the cross branch adds
  const parallel::SequenceParallelAttention seq;
  const models::nn::AttentionCore core = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    seq.self_attention(q, k, v, hd, p, out);
  };
  const models::nn::CrossContext ctx{&text};
  Tensor got = x.clone();
  block.forward(got, {mod, d}, {&core, nullptr, nullptr, &ctx});
  // The same block without norm2, fed the normalised input, adds the same cross branch.
  std::vector<float> normed = values(x);
  norm_ref(normed, d, named(w, "b.norm2.weight"), &named(w, "b.norm2.bias"), 1e-5f);
  Tensor normed_x = Tensor::empty({bsz, p, d});
  std::copy(normed.begin(), normed.end(), normed_x.data());
  const Tensor branch = without.cross_attention().cross_attention(normed_x, ctx);
  std::vector<float> ref = values(x);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += branch[static_cast<int64_t>(i)];
  CHECK(rel_l2(got, ref) < 1e-5);
}

TEST_CASE("nn::TensorDecl: how tp splits an attention's tensors, and declared dtypes") {
  const models::nn::AttentionDims dims{4, 3, 12, 12};
  const models::nn::ElementCount n = models::nn::count_elements(models::nn::Attention::tensors("a.", dims));
  CHECK(n.split == 3 * (12 * 12 + 12) + 12 * 12);  // q, k, v by rows; to_out's weight by columns
  CHECK(n.whole == 12);                             // to_out's bias, added once after the all-reduce

  testing::TempDir dir("nn_decl");
  const auto store = store_of(dir, {{"t", testing::random_tensor({2, 3}, 1)}});
  models::nn::check_tensors(store, {{"t", {2, 3}}});
  models::nn::check_tensors(store, {{"t", {2, 3}, models::nn::TpSplit::kWhole, DType::kF32}});
  CHECK_THROWS_WITH_AS(
      models::nn::check_tensors(store, {{"t", {2, 3}, models::nn::TpSplit::kWhole, DType::kBF16}}),
      doctest::Contains("tensor 't' has dtype F32, expected bfloat16"), ModelError);
  CHECK_THROWS_WITH_AS(models::nn::check_tensors(store, {{"t", {3, 2}}}), doctest::Contains("expected [3, 2]"),
                       ModelError);
}

TEST_CASE("nn::TensorDecl: legacy names and another stored shape are declared once, checked and loaded") {
  testing::TempDir dir("nn_decl_legacy");
  const Tensor w = testing::random_tensor({3, 3, 1, 1}, 2), b = testing::random_tensor({3}, 3);
  const auto store = store_of(dir, {{"old.weight", w}, {"new.bias", b}});
  const models::nn::TensorDecl weight{"new.weight", {3, 3}, models::nn::TpSplit::kWhole, std::nullopt,
                                      {"older.weight", "old.weight"}, {3, 3, 1, 1}};
  const models::nn::TensorDecl bias{"new.bias", {3}, models::nn::TpSplit::kWhole, std::nullopt, {"old.bias"}};
  models::nn::check_tensors(store, {weight, bias});
  CHECK(models::nn::stored_name(store, weight) == "old.weight");  // the first legacy name the store holds
  CHECK(models::nn::stored_name(store, bias) == "new.bias");      // the current name first
  const Tensor loaded = models::nn::load_declared(store, weight);  // read as the declared (3, 3)
  REQUIRE(loaded.shape() == Shape{3, 3});
  for (int64_t i = 0; i < 9; ++i) CHECK(loaded[i] == w[i]);
  CHECK(models::nn::count_elements({weight, bias}).total() == 12);

  // Neither shape, and no name at all: both named in the error.
  models::nn::TensorDecl wrong = weight;
  wrong.shape = {3, 2};
  wrong.alt_shape = {3, 2, 1, 1};
  CHECK_THROWS_WITH_AS(models::nn::check_tensors(store, {wrong}),
                       doctest::Contains("tensor 'old.weight' has shape [3, 3, 1, 1], expected [3, 2] or [3, 2, 1, 1]"),
                       ModelError);
  const models::nn::TensorDecl absent{"a.weight", {3}, models::nn::TpSplit::kWhole, std::nullopt, {"b.weight"}};
  CHECK_THROWS_WITH_AS(models::nn::check_tensors(store, {absent}),
                       doctest::Contains("missing tensor 'a.weight' (or legacy 'b.weight')"), ModelError);
}

TEST_CASE("nn::UpsampleConv2d: nearest x2 then the 3x3 convolution, against the plain loop on the upsampled image") {
  const int64_t B = 2, in = 3, out = 5, H = 5, W = 7;
  const Tensor w = testing::random_tensor({out, in, 3, 3}, 11), b = testing::random_tensor({out}, 12);
  const Tensor x = testing::random_tensor({B, in, H, W}, 13);
  // ref (B, out, 2H, 2W): sum over the 3x3 window of the upsampled image u[y][x] = x[y / 2][x / 2], zero outside.
  std::vector<double> ref(static_cast<size_t>(B * out * 4 * H * W));
  for (int64_t n = 0; n < B; ++n)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t yo = 0; yo < 2 * H; ++yo)
        for (int64_t xo = 0; xo < 2 * W; ++xo) {
          double s = b[o];
          for (int64_t i = 0; i < in; ++i)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t uy = yo + ky - 1, ux = xo + kx - 1;
                if (uy < 0 || ux < 0 || uy >= 2 * H || ux >= 2 * W) continue;
                s += static_cast<double>(w[((o * in + i) * 3 + ky) * 3 + kx]) *
                     x[((n * in + i) * H + uy / 2) * W + ux / 2];
              }
          ref[static_cast<size_t>(((n * out + o) * 2 * H + yo) * 2 * W + xo)] = s;
        }
  testing::TempDir dir("upsample_conv");
  const io::WeightStore store = store_of(dir, {{"up.weight", w}, {"up.bias", b}});
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    CAPTURE(dtype_name(dtype));
    const nn::UpsampleConv2d up = nn::UpsampleConv2d::load(store, "up.", out, in, {Device::kCPU, dtype});
    const Tensor y = up(x);
    REQUIRE(y.shape() == Shape{B, out, 2 * H, 2 * W});
    CHECK(testing::rel_l2(y, ref) < (dtype == DType::kF32 ? 1e-6 : 1e-2));
  }
  // A missing tensor is the store's ModelError naming it.
  CHECK_THROWS_AS(nn::UpsampleConv2d::load(store, "other.", out, in, {Device::kCPU, DType::kF32}), ModelError);
}
