// T5's attention and feed-forward: the ops of transformers' T5Attention
// (no scale, an additive per-head bias, padding keys excluded) and
// T5Dense(Gated)ActDense, in its order.
#include "models/nn/t5_layers.h"

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

// ---- T5Attention ----------------------------------------------------------------

TensorDecls T5Attention::tensors(const std::string& prefix, const T5AttentionDims& d) {
  const int64_t inner = d.inner();
  TensorDecls t;
  for (const char* p : {"q", "k", "v"}) t.push_back({prefix + p + ".weight", {inner, d.dim}});
  t.push_back({prefix + "o.weight", {d.dim, inner}});
  if (d.position_table) t.push_back({prefix + "relative_attention_bias.weight", {d.buckets, d.heads}});
  return t;
}

T5Attention T5Attention::load(const io::WeightStore& w, const std::string& prefix, const T5AttentionDims& d,
                              const Placement& place) {
  const TensorDecls t = tensors(prefix, d);
  T5Attention a;
  a.dims_ = d;
  a.place_ = place;
  a.q_w_ = load_as(w, t[0], place, Placed::kMatrix);
  a.k_w_ = load_as(w, t[1], place, Placed::kMatrix);
  a.v_w_ = load_as(w, t[2], place, Placed::kMatrix);
  a.o_w_ = load_as(w, t[3], place, Placed::kMatrix);
  // The bias is built on the host, then moved (float32 whatever the dtype).
  if (d.position_table) a.position_table_ = load_declared(w, t[4]).to(Device::kCPU, DType::kF32);
  return a;
}

Tensor T5Attention::operator()(const Tensor& x, const Tensor& bias, const std::vector<int32_t>& lengths, int64_t n,
                               int64_t length) const {
  const int64_t inner = dims_.inner(), rows = n * length;
  // q, k and v each in a contiguous (rows, inner) buffer: the CPU GEMM
  // writing into columns of a wider one ran 15% slower (oneDNN falls back
  // from its brgemm kernels for a strided output).
  Tensor q, k, v;
  {
    profile::ScopedTimer t("t5.qkv_proj");
    q = ops::linear(x, q_w_, nullptr);  // (rows, inner)
    k = ops::linear(x, k_w_, nullptr);
    v = ops::linear(x, v_w_, nullptr);
  }
  Tensor att = place_.empty({rows, inner});
  ops::AttentionArgs args = ops::attention_args(ops::rows_of(q, 0, inner, length), ops::rows_of(k, 0, inner, length),
                                                ops::rows_of(v, 0, inner, length), ops::rows_of(att, 0, inner, length),
                                                n, dims_.heads, dims_.head_dim);
  args.scale = 1.0f;  // T5: no 1/sqrt(d_kv)
  args.bias = static_cast<const float*>(bias.raw());
  args.bias_head_stride = length * length;
  args.bias_row_stride = length;
  args.kv_lens = lengths.data();  // padding keys take no part
  args.follow_attention_mode = false;  // a forced --attention flash is the transformer's; flash takes no bias
  args.compute = place_.dtype;
  {
    profile::ScopedTimer t("t5.attention");
    ops::attention(args);
  }
  profile::ScopedTimer t("t5.out_proj");
  return ops::linear(att, o_w_, nullptr);
}

// ---- T5FeedForward --------------------------------------------------------------

TensorDecls T5FeedForward::tensors(const std::string& prefix, const T5FeedForwardDims& d) {
  TensorDecls t;
  if (d.gated) {
    t.push_back({prefix + "wi_0.weight", {d.hidden, d.dim}});
    t.push_back({prefix + "wi_1.weight", {d.hidden, d.dim}});
  } else {
    t.push_back({prefix + "wi.weight", {d.hidden, d.dim}});
  }
  t.push_back({prefix + "wo.weight", {d.dim, d.hidden}});
  return t;
}

T5FeedForward T5FeedForward::load(const io::WeightStore& w, const std::string& prefix, const T5FeedForwardDims& d,
                                  const Placement& place) {
  const TensorDecls t = tensors(prefix, d);
  T5FeedForward ff;
  ff.dims_ = d;
  ff.wi_w_ = load_as(w, t[0], place, Placed::kMatrix);
  if (d.gated) ff.wi_gate_w_ = load_as(w, t[1], place, Placed::kMatrix);
  ff.wo_w_ = load_as(w, t.back(), place, Placed::kMatrix);
  return ff;
}

Tensor T5FeedForward::operator()(const Tensor& x) const {
  Tensor hidden;
  {
    profile::ScopedTimer t("t5.mlp_in");
    // The first projection and its activation (GELU fused into the GEMM:
    // gelu_new is the tanh approximation).
    if (dims_.act == T5Activation::kGeluNew) {
      hidden = ops::linear(x, wi_w_, nullptr, ops::Activation::kGeluTanh);
    } else {
      hidden = ops::linear(x, wi_w_, nullptr);
      if (dims_.act == T5Activation::kRelu)
        ops::relu_(hidden);
      else
        ops::silu_(hidden);
    }
    if (dims_.gated) ops::mul_(hidden, ops::linear(x, wi_gate_w_, nullptr));  // (rows, d_ff)
  }
  profile::ScopedTimer t("t5.mlp_out");
  return ops::linear(hidden, wo_w_, nullptr);
}

}  // namespace ditgen::models::nn
