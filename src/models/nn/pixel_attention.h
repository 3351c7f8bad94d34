// The single-head self-attention over the pixels of an image that the VAE
// decoders' mid blocks hold (diffusers' Attention as AutoencoderKL builds it,
// _from_deprecated_attn_block; Wan's WanAttentionBlock): q, k, v and the
// output are C x C projections, one head of C channels, residual added,
// rescale 1. The norm before it is the caller's (GroupNorm, or Wan's
// channel RMS norm: nn/norm.h).
// It works on (C, H*W) maps without transposes: the q/k/v projection is one
// GEMM with a transposed A (the pixels are the columns of the normed map),
// giving token rows (H*W, 3C) that ops::attention reads q, k and v from, and
// the output projection a GEMM with a transposed B that writes (C, H*W)
// straight onto the residual; its bias enters as a rank-1 product bias (C,
// 1) . ones (1, H*W), so every step is an op on the model's device.
// Stored two ways:
//   separate  AutoencoderKL's to_q, to_k, to_v, to_out.0 (C, C) each, also
//             under the names of checkpoints saved before diffusers 0.14
//             (query, key, value, proj_attn, as diffusers'
//             _fix_state_dict_keys_on_load renames them) and as 1x1 convs
//             (C, C, 1, 1); q/k/v fused into one (3C, C) on the host at load.
//   fused     Wan's to_qkv (3C, C, 1, 1) and proj (C, C, 1, 1), 1x1 convs.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class PixelAttention {
 public:
  static TensorDecls separate_tensors(const std::string& prefix, int64_t channels);
  static PixelAttention load_separate(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                                      const Placement& place);
  static TensorDecls fused_tensors(const std::string& prefix, int64_t channels);
  static PixelAttention load_fused(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                                   const Placement& place);

  // normed (T, C, H, W): T images after the norm (consumed: released once
  // projected); out (T, C, H, W): the residual, to which each image's
  // attention output is added in place.
  void add_to(Tensor normed, Tensor& out) const;

 private:
  Placement place_;
  Tensor qkv_w_;  // (3C, C) rows q | k | v: the b of a GEMM, in the compute dtype
  Tensor qkv_b_;  // (3C)
  Tensor out_w_;  // (C, C), Placement::put (the a of a GEMM: float32 on the CPU)
  Tensor out_b_;  // (C)
};

}  // namespace ditgen::models::nn
