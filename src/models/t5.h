// The T5 text encoder as transformers computes it (T5EncoderModel,
// UMT5EncoderModel), on the op front end so it runs on either device:
//
//   h = embed_tokens[ids]                                  (N, L, D)
//   per block:  h += o(attention(q(n), k(n), v(n)) + bias)  n = rms_norm(h)
//               h += wo(act(wi n))           v1.0 (relu)
//               h += wo(act(wi_0 n) * wi_1 n) v1.1 / UMT5 (gated-gelu: gelu_new)
//   out = rms_norm(h, final_layer_norm)
//
// T5's attention has no 1/sqrt(d) scale; its scores get an additive bias
// per head from a learned table of bucketed relative positions (block 0's
// table shared by every block; UMT5: one per block). Padding keys take no
// part (the attention's per-sample key counts: transformers adds
// finfo.min to them, which gives exactly zero weight). RMSNorm, softmax and
// the residual stream are float32; GEMM weights as Placement says (on the
// CPU: float32, or bfloat16 widened inside the GEMM).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/t5_spec.h"
#include "models/text_encoder.h"

namespace ditgen::models {

class T5Encoder final : public TextEncoder {
 public:
  // `weights` must have passed T5Spec's shape checks.
  T5Encoder(const T5Config& cfg, const io::WeightStore& weights, const Placement& place);
  Tensor encode(const TokenBatch& tokens) const override;

 private:
  struct Block {
    Tensor q_w, k_w, v_w;    // (H*d_kv, D) each
    Tensor o_w;              // (D, H*d_kv)
    Tensor attn_norm_w;      // (D)
    Tensor position_table;   // (num_buckets, H) host float32; UMT5: every block, T5: block 0 only
    Tensor wi_w;             // (d_ff, D) relu, or wi_0 of the gated pair
    Tensor wi_gate_w;        // (d_ff, D) wi_1 (gated only)
    Tensor wo_w;             // (D, d_ff)
    Tensor ff_norm_w;        // (D)
  };
  // Rows of `tokens` (N*L ids) looked up in the embedding table: (N*L, D).
  Tensor embed(const TokenBatch& tokens) const;
  // The score bias of one block for sequences of L tokens: (H, L, L) float32
  // on the placement's device, bias[h, i, j] = table[bucket(j - i), h].
  Tensor position_bias(const Tensor& table, int64_t L) const;
  void run_block(const Block& b, const Tensor& bias, const std::vector<int32_t>& lengths, int64_t n, int64_t L,
                 Tensor& h) const;

  T5Config cfg_;
  Placement place_;
  Tensor embed_table_;     // (vocab, D), as table(): rows copied out per token
  std::vector<Block> blocks_;
  Tensor final_norm_w_;    // (D)
};

}  // namespace ditgen::models
