// What the Wan VAE's encoder and decoder (models/autoencoder_kl_wan.h,
// models/autoencoder_kl_wan_encoder.h) share besides the modules of
// models/nn/: diffusers' WanMidBlock (num_layers 1), the same in both under
// "encoder.mid_block." / "decoder.mid_block.": a WanResidualBlock, a
// WanAttentionBlock, a WanResidualBlock, all at one channel count. The
// attention block: WanRMS_norm over the channels (gamma (C, 1, 1)), then
// one head of C channels over the H*W pixels of each frame (to_qkv, proj:
// 1x1 convs, nn::PixelAttention's fused form), plus the input. Its two
// residual blocks take four slots of the call's causal cache
// (causal_inputs).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/causal_conv3d.h"
#include "models/nn/causal_resnet.h"
#include "models/nn/norm.h"
#include "models/nn/pixel_attention.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models {

class WanMidBlock {
 public:
  // `prefix`: "decoder.mid_block." or "encoder.mid_block.".
  static nn::TensorDecls tensors(const std::string& prefix, int64_t channels);
  static WanMidBlock load(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                          const Placement& place);
  // x (1, C, T, H, W) -> (1, C, T, H, W), through four slots of `cache`.
  Tensor operator()(Tensor x, nn::CausalCache& cache) const;
  // The two residual blocks, in the order they run (their causal convs'
  // slots: decoder_causal_slots and the encoder's list).
  const nn::WanResidualBlock& resnet0() const { return resnet0_; }
  const nn::WanResidualBlock& resnet1() const { return resnet1_; }

 private:
  // The attention block over each frame, x consumed.
  Tensor attention(Tensor x) const;

  Placement place_;
  nn::WanResidualBlock resnet0_, resnet1_;  // C -> C
  nn::ChannelRmsNorm attn_norm_;            // gamma (C, 1, 1)
  nn::PixelAttention attn_;                 // to_qkv (3C, C, 1, 1), proj (C, C, 1, 1)
};

}  // namespace ditgen::models
