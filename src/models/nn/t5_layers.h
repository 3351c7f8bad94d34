// The layers of a T5 encoder block (transformers' T5Attention and
// T5DenseActDense / T5DenseGatedActDense; the norms are nn::RmsNorm), each
// declaring its tensors and loading exactly those. GEMM weights go through
// Placement::matrix (as stored, or converted once; T5 has no biases).
//   T5Attention    q, k, v (H*d_kv, D) and o (D, H*d_kv); no 1/sqrt(d)
//                  scale; the scores get an additive bias per head (the
//                  caller's, made from the position table: block 0's table
//                  serves every block of T5, UMT5 has one per block), and
//                  padding keys take no part (per-sample key counts:
//                  transformers adds finfo.min to them, which gives exactly
//                  zero weight). The table is held on the host in float32.
//   T5FeedForward  wo(act(wi x)) (v1.0: relu), or wo(act(wi_0 x) * wi_1 x)
//                  (v1.1 / UMT5: gated, gelu_new = the tanh GELU, fused into
//                  the GEMM).
// Profiled as t5.qkv_proj, t5.attention, t5.out_proj, t5.mlp_in, t5.mlp_out.
// Names under `prefix`: "encoder.block.<i>.layer.0.SelfAttention." (q, k,
// v, o, relative_attention_bias), "encoder.block.<i>.layer.1.DenseReluDense."
// (wi or wi_0 + wi_1, wo).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

struct T5AttentionDims {
  int64_t dim = 0;               // D
  int64_t heads = 0, head_dim = 0;
  int64_t buckets = 0;           // relative_attention_num_buckets
  bool position_table = false;   // this layer holds a relative_attention_bias
  int64_t inner() const { return heads * head_dim; }
};

class T5Attention {
 public:
  static TensorDecls tensors(const std::string& prefix, const T5AttentionDims& dims);
  static T5Attention load(const io::WeightStore& weights, const std::string& prefix, const T5AttentionDims& dims,
                          const Placement& place);
  // x (n*L, D), the normed rows of n sequences of L tokens; bias (H, L, L)
  // float32 on the placement's device; lengths: each sequence's real tokens
  // (its keys) -> (n*L, D), the output projection.
  Tensor operator()(const Tensor& x, const Tensor& bias, const std::vector<int32_t>& lengths, int64_t n,
                    int64_t length) const;
  // (num_buckets, H) host float32; undefined where the layer holds none.
  const Tensor& position_table() const { return position_table_; }

 private:
  T5AttentionDims dims_;
  Placement place_;
  Tensor q_w_, k_w_, v_w_;  // (H*d_kv, D) each
  Tensor o_w_;              // (D, H*d_kv)
  Tensor position_table_;   // (num_buckets, H)
};

enum class T5Activation { kRelu, kGeluNew, kSilu };

struct T5FeedForwardDims {
  int64_t dim = 0, hidden = 0;  // D, d_ff
  bool gated = false;
  T5Activation act = T5Activation::kRelu;
};

class T5FeedForward {
 public:
  static TensorDecls tensors(const std::string& prefix, const T5FeedForwardDims& dims);
  static T5FeedForward load(const io::WeightStore& weights, const std::string& prefix, const T5FeedForwardDims& dims,
                            const Placement& place);
  // x (rows, D) -> (rows, D).
  Tensor operator()(const Tensor& x) const;

 private:
  T5FeedForwardDims dims_;
  Tensor wi_w_;       // (d_ff, D): wi, or wi_0 of the gated pair
  Tensor wi_gate_w_;  // (d_ff, D): wi_1 (gated only)
  Tensor wo_w_;       // (D, d_ff)
};

}  // namespace ditgen::models::nn
