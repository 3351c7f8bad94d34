// The T5 text encoder as transformers computes it (T5EncoderModel,
// UMT5EncoderModel), on the op front end so it runs on either device:
//
//   h = embed_tokens[ids]                                  (N, L, D)
//   per block:  h += o(attention(q(n), k(n), v(n)) + bias)  n = rms_norm(h)
//               h += wo(act(wi n))           v1.0 (relu)
//               h += wo(act(wi_0 n) * wi_1 n) v1.1 / UMT5 (gated-gelu: gelu_new)
//   out = rms_norm(h, final_layer_norm)
//
// A composition of the modules of models/nn/: nn::T5Attention and
// nn::T5FeedForward (nn/t5_layers.h), each after an nn::RmsNorm, and the
// token embedding declared with its legacy name (shared.weight, or
// encoder.embed_tokens.weight). Its declarations (stem_tensors,
// layer_tensors) are what T5Spec checks before loading and counts the
// parameters from. T5's attention has no 1/sqrt(d) scale; its scores get an
// additive bias per head from a learned table of bucketed relative
// positions (block 0's table shared by every block; UMT5: one per block).
// RMSNorm, softmax and the residual stream are float32; GEMM weights as
// Placement says (on the CPU: float32, or bfloat16 widened inside the GEMM).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/norm.h"
#include "models/nn/t5_layers.h"
#include "models/nn/tensor_decl.h"
#include "models/t5_spec.h"
#include "models/text_encoder.h"

namespace ditgen::models {

class T5Encoder final : public TextEncoder {
 public:
  // What it holds once (the token embedding, the final norm) and block i's
  // tensors, whole as stored.
  static nn::TensorDecls stem_tensors(const T5Config& cfg);
  static nn::TensorDecls layer_tensors(const T5Config& cfg, int64_t layer);
  // Checks every declared tensor against the store (and refuses more
  // encoder blocks than num_layers) before anything is read.
  static void check(const io::WeightStore& weights, const T5Config& cfg);

  // `weights` must have passed check().
  T5Encoder(const T5Config& cfg, const io::WeightStore& weights, const Placement& place);
  Tensor encode(const TokenBatch& tokens) const override;

 private:
  struct Block {
    nn::RmsNorm attn_norm;        // layer.0.layer_norm: (D)
    nn::T5Attention attention;    // layer.0.SelfAttention; its position table: UMT5 every block, T5 block 0 only
    nn::RmsNorm ff_norm;          // layer.1.layer_norm: (D)
    nn::T5FeedForward feed_forward;  // layer.1.DenseReluDense
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
  nn::RmsNorm final_norm_;  // (D)
};

}  // namespace ditgen::models
