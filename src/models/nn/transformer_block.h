// The adaLN-modulated transformer block that DiT, PixArt and Latte share
// (diffusers' BasicTransformerBlock with norm_type ada_norm_zero or
// ada_norm_single; Wan's block has the same three branches), as a
// composition of the modules beside it:
//   x += gate_msa * attn1(LN(x) * (1 + scale_msa) + shift_msa)
//   x += attn2(norm2(x), text)              (optional: no gate, no
//                                            modulation; norm2 optional;
//                                            Wan I2V: the image tokens
//                                            attended too, nn/attention.h)
//   x += gate_mlp * ff(LN(x) * (1 + scale_mlp) + shift_mlp)
// The (B, 6D) modulation is the caller's (nn/modulation.h: AdaLnZero per
// block for DiT, adaLN-single's shared vector plus the block's table for
// PixArt and Latte), and so is the self-attention's core (and its layout
// switch and rotary positions: nn/attention.h). Each branch runs inside a
// PAB branch (nn/pab_branch.h), so a reused one skips its compute and its
// communication. Under tp each rank holds its heads and MLP features.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/attention.h"
#include "models/nn/feed_forward.h"
#include "models/nn/modulation.h"
#include "models/nn/pab_branch.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "models/shard_groups.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// The names of a block's parts under its prefix (diffusers': Wan calls its
// feed-forward "ffn.").
struct TransformerBlockNames {
  std::string self = "attn1.", cross = "attn2.", cross_norm = "norm2.", ff = "ff.";
};

struct TransformerBlockDims {
  TransformerBlockNames names;
  AttentionDims self;      // attn1 (context_dim = query_dim)
  AttentionDims cross;     // attn2; heads 0 = none
  bool cross_norm = false;  // a norm before attn2: LayerNorm with affine at cross_norm_eps (Wan's cross_attn_norm)
  float cross_norm_eps = 1e-6f;
  FeedForwardDims ff;
  float attention_norm_eps = 1e-6f, mlp_norm_eps = 1e-6f;  // the two modulated LayerNorms
  bool has_cross() const { return cross.heads > 0; }
};

// What one call of a block reads besides its weights.
struct BlockInputs {
  const AttentionCore* core = nullptr;        // the self-attention's core (required)
  const LayoutSwitch* around = nullptr;       // null: the self-attention runs in the block's layout
  const Rotary* rotary = nullptr;             // null: no rotary positions
  const CrossContext* text = nullptr;         // required iff the block has a cross-attention
  PabSite pab = {};                           // where its branches are cached
  pab::Kind self_kind = pab::Kind::kSpatial;  // the self-attention's PAB kind (Latte's temporal blocks: kTemporal)
  const CrossContext* image = nullptr;        // required iff its cross-attention has added_kv_dim (Wan I2V)
};

class TransformerBlock {
 public:
  // Its tensors under `prefix` ("transformer_blocks.3."), whole.
  static TensorDecls tensors(const std::string& prefix, const TransformerBlockDims& dims);
  // This rank's heads and features (the shard's communicators outlive the block).
  static TransformerBlock load(const io::WeightStore& weights, const std::string& prefix,
                               const TransformerBlockDims& dims, const ShardGroups& shard, const Placement& place);

  // hidden (B, P, D) += the branches, in place; mod (B, 6D).
  void forward(Tensor& hidden, const Modulation& mod, const BlockInputs& in) const;
  // The self-attention's input LN(hidden) * (1 + scale_msa) + shift_msa, (B, P, D)
  // (TeaCache's signal: the first block's modulated input).
  Tensor attention_input(const Tensor& hidden, const Modulation& mod) const;

  const Attention& self_attention() const { return attn1_; }
  const Attention& cross_attention() const { return attn2_; }
  const FeedForward& feed_forward() const { return ff_; }

 private:
  TransformerBlockDims dims_;
  ShardGroups shard_;
  Placement place_;
  Attention attn1_;
  Attention attn2_;                   // when dims_.has_cross()
  Tensor cross_norm_w_, cross_norm_b_;  // (D), (D): norm2 (cross_norm only)
  FeedForward ff_;
};

}  // namespace ditgen::models::nn
