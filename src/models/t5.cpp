// T5Encoder: loads block by block (each GEMM weight placed, and its source
// pages released when that made a copy, before the next is read: a float32
// checkpoint encoded in bfloat16 never holds both whole copies) and runs the
// batch through the blocks in chunks of kPromptsPerPass prompts, so
// activation memory does not grow with the number of prompts.
#include "models/t5.h"

#include <algorithm>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr int64_t kPromptsPerPass = 8;

// The feed-forward's first projection and its activation (GELU fused into
// the GEMM: gelu_new is the tanh approximation).
Tensor project_activated(const Tensor& x, const Tensor& w, T5Activation act) {
  if (act == T5Activation::kGeluNew) return ops::linear(x, w, nullptr, ops::Activation::kGeluTanh);
  Tensor y = ops::linear(x, w, nullptr);
  if (act == T5Activation::kRelu) ops::relu_(y);
  else ops::silu_(y);
  return y;
}

}  // namespace

T5Encoder::T5Encoder(const T5Config& cfg, const io::WeightStore& w, const Placement& place)
    : cfg_(cfg), place_(place) {
  auto matrix = [&](const std::string& name) { return load_matrix(w, name, place); };
  auto vector = [&](const std::string& name) { return place.put(w.load(name)); };
  embed_table_ = load_table(w, t5_embedding_name(w), place);
  blocks_.resize(static_cast<size_t>(cfg.num_layers));
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string a = "encoder.block." + std::to_string(i) + ".layer.0.";
    const std::string f = "encoder.block." + std::to_string(i) + ".layer.1.";
    b.q_w = matrix(a + "SelfAttention.q.weight");
    b.k_w = matrix(a + "SelfAttention.k.weight");
    b.v_w = matrix(a + "SelfAttention.v.weight");
    b.o_w = matrix(a + "SelfAttention.o.weight");
    b.attn_norm_w = vector(a + "layer_norm.weight");
    if (i == 0 || cfg.umt5)  // the bias is built on the host, then moved (float32 whatever the dtype)
      b.position_table = w.load(a + "SelfAttention.relative_attention_bias.weight").to(Device::kCPU, DType::kF32);
    b.wi_w = matrix(f + (cfg.gated ? "DenseReluDense.wi_0.weight" : "DenseReluDense.wi.weight"));
    if (cfg.gated) b.wi_gate_w = matrix(f + "DenseReluDense.wi_1.weight");
    b.wo_w = matrix(f + "DenseReluDense.wo.weight");
    b.ff_norm_w = vector(f + "layer_norm.weight");
  }
  final_norm_w_ = vector("encoder.final_layer_norm.weight");
}

Tensor T5Encoder::embed(const TokenBatch& tokens) const {
  const int64_t L = tokens.max_length();
  Tensor out = place_.empty({static_cast<int64_t>(tokens.ids.size()) * L, cfg_.d_model});
  int64_t row = 0;
  for (const std::vector<int64_t>& ids : tokens.ids)
    for (const int64_t id : ids) {
      if (id < 0 || id >= cfg_.vocab_size)
        throw ModelError(cfg_.path + ": vocab_size: token id " + std::to_string(id) +
                         " is outside the embedding table of " + std::to_string(cfg_.vocab_size) +
                         " rows (does the tokenizer belong to this encoder?)");
      Tensor dst = out.slice0(row, row + 1);
      dst.copy_from(embed_table_.slice0(id, id + 1));  // converts a bfloat16 row to the compute dtype
      ++row;
    }
  return out;
}

Tensor T5Encoder::position_bias(const Tensor& table, int64_t L) const {
  const int64_t H = cfg_.num_heads;
  std::vector<int64_t> bucket(static_cast<size_t>(2 * L - 1));  // by j - i + L - 1
  for (int64_t r = -(L - 1); r <= L - 1; ++r)
    bucket[static_cast<size_t>(r + L - 1)] = t5_position_bucket(r, cfg_.num_buckets, cfg_.max_distance);
  Tensor bias = Tensor::empty({H, L, L});
  const float* t = table.data();  // (num_buckets, H)
  float* out = bias.data();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) out[(h * L + i) * L + j] = t[bucket[static_cast<size_t>(j - i + L - 1)] * H + h];
  return bias.to(place_.device, DType::kF32);
}

void T5Encoder::run_block(const Block& b, const Tensor& bias, const std::vector<int32_t>& lengths, int64_t n,
                          int64_t L, Tensor& h) const {
  const int64_t inner = cfg_.inner_dim(), rows = n * L;
  // Self-attention. q, k and v each in a contiguous (rows, inner) buffer:
  // the CPU GEMM writing into columns of a wider one ran 15% slower (oneDNN
  // falls back from its brgemm kernels for a strided output).
  Tensor x;
  {
    profile::ScopedTimer t("t5.rms_norm");
    x = ops::rms_norm(h, b.attn_norm_w, cfg_.eps);  // (rows, D)
  }
  Tensor q, k, v;
  {
    profile::ScopedTimer t("t5.qkv_proj");
    q = ops::linear(x, b.q_w, nullptr);  // (rows, inner)
    k = ops::linear(x, b.k_w, nullptr);
    v = ops::linear(x, b.v_w, nullptr);
  }
  Tensor att = place_.empty({rows, inner});
  ops::AttentionArgs args = ops::attention_args(ops::rows_of(q, 0, inner, L), ops::rows_of(k, 0, inner, L),
                                                ops::rows_of(v, 0, inner, L), ops::rows_of(att, 0, inner, L), n,
                                                cfg_.num_heads, cfg_.d_kv);
  args.scale = 1.0f;  // T5: no 1/sqrt(d_kv)
  args.bias = static_cast<const float*>(bias.raw());
  args.bias_head_stride = L * L;
  args.bias_row_stride = L;
  args.kv_lens = lengths.data();  // padding keys take no part
  args.follow_attention_mode = false;  // a forced --attention flash is the transformer's; flash takes no bias
  args.compute = place_.dtype;
  {
    profile::ScopedTimer t("t5.attention");
    ops::attention(args);
  }
  {
    profile::ScopedTimer t("t5.out_proj");
    ops::add_(h, ops::linear(att, b.o_w, nullptr));
  }

  // Feed-forward.
  {
    profile::ScopedTimer t("t5.rms_norm");
    x = ops::rms_norm(h, b.ff_norm_w, cfg_.eps);
  }
  Tensor hidden;
  {
    profile::ScopedTimer t("t5.mlp_in");
    hidden = project_activated(x, b.wi_w, cfg_.act);  // (rows, d_ff)
    if (cfg_.gated) ops::mul_(hidden, ops::linear(x, b.wi_gate_w, nullptr));
  }
  profile::ScopedTimer t("t5.mlp_out");
  ops::add_(h, ops::linear(hidden, b.wo_w, nullptr));
}

Tensor T5Encoder::encode(const TokenBatch& tokens) const {
  const int64_t N = static_cast<int64_t>(tokens.ids.size()), L = tokens.max_length(), D = cfg_.d_model;
  if (N == 0) return Tensor::empty({0, 0, D});
  if (static_cast<int64_t>(tokens.lengths.size()) != N)
    throw std::invalid_argument("T5Encoder::encode: " + std::to_string(N) + " prompts with " +
                                std::to_string(tokens.lengths.size()) + " lengths");
  for (int64_t i = 0; i < N; ++i)
    if (static_cast<int64_t>(tokens.ids[i].size()) != L || tokens.lengths[i] < 1 || tokens.lengths[i] > L)
      throw std::invalid_argument("T5Encoder::encode: prompt " + std::to_string(i) + " has " +
                                  std::to_string(tokens.ids[i].size()) + " ids and length " +
                                  std::to_string(tokens.lengths[i]) + " (expected " + std::to_string(L) + ")");

  Tensor out = Tensor::empty({N, L, D});
  // Block 0's bias serves every block of T5; UMT5's blocks make their own.
  const Tensor shared_bias = cfg_.umt5 ? Tensor() : position_bias(blocks_[0].position_table, L);
  for (int64_t p0 = 0; p0 < N; p0 += kPromptsPerPass) {
    const int64_t n = std::min(kPromptsPerPass, N - p0);
    TokenBatch chunk;
    std::vector<int32_t> lengths;
    for (int64_t i = p0; i < p0 + n; ++i) {
      chunk.ids.push_back(tokens.ids[i]);
      chunk.lengths.push_back(tokens.lengths[i]);
      lengths.push_back(static_cast<int32_t>(tokens.lengths[i]));
    }
    Tensor h = embed(chunk);  // (n*L, D) residual stream
    for (const Block& b : blocks_)
      run_block(b, cfg_.umt5 ? position_bias(b.position_table, L) : shared_bias, lengths, n, L, h);
    const Tensor result = ops::rms_norm(h, final_norm_w_, cfg_.eps).to(Device::kCPU, DType::kF32);
    out.slice0(p0, p0 + n).copy_from(result);
  }
  return out;
}

}  // namespace ditgen::models
