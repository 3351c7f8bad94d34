// The encoder half of diffusers' AutoencoderKLWan (Wan 2.1's causal 3-D
// VAE): a video's pixels to the latents an image-to-video pipeline
// conditions on, on the CPU (float32, or bfloat16 convolution weights) or
// CUDA (models::Placement), behind the seam's VaeEncoder
// (models/vae_spec.h).
//
// Structure (diffusers 0.42.1 WanEncoder3d, attn_scales []): conv_in (causal 3x3x3, in_channels -> dims[0]); per level i of
// dim_mult (dims = base_dim * [1] + dim_mult) num_res_blocks residual
// blocks (dims[i] -> dims[i + 1], then at dims[i + 1]) and, in every level
// but the last, a WanResample: "downsample2d" (per frame, zero padding of
// one row below and one column right, a 3x3 conv at stride 2) or, where
// temperal_downsample says so, "downsample3d" (the same, then a (3, 1, 1)
// time conv at stride 2 over [the previous chunk's last frame | chunk]:
// nn::CausalTimeDownsample); the mid block the decoder shares
// (models/wan_vae_blocks.h); RMS norm + SiLU; conv_out (causal 3x3x3 ->
// 2 z_dim); then quant_conv (1x1x1, 2 z_dim -> 2 z_dim): the latent
// distribution's mean and log-variance. Wan 2.1's down_blocks are one flat
// list (residual blocks and resamples in that order), as stored. Wan 2.2's
// (is_residual: WanResidualDownBlock) are one block a level (resnets.N.,
// downsampler.), each adding diffusers' AvgDown3D of its input to its
// output: the input's values averaged in groups over channels, 2 x 2
// pixels (all but the last level) and 2 frames (a temporal level; a
// one-frame chunk is padded with a zero frame in front), held as a conv3d
// of constant weights 1/group at stride = kernel (computed before the
// level's resnets, so only its small output is held).
//
// patch_size p (Wan 2.2 TI2V: 2): the video is patchified on the host
// first (nn/vae_patches.h: in_channels = 3 p^2 channels at 1/p the
// pixels); everything after works on the patches, and tiles are read in
// patches, as diffusers' tiled_encode reads them.
//
// Chunks (diffusers' _encode): the first frame alone, then four frames at
// a time, through one causal cache (nn::CausalCache, every slot starting
// as zeros: WanCausalConv3d's padding), each chunk giving one latent frame
// for Wan's temporal factor 4 (4 / temporal_factor() in general). So memory
// is one chunk's activations plus the caches (two frames per causal conv
// at its level), never the video's length. Frames must be 1 + 4k, and H, W
// multiples of the spatial factor (every level's grid is then exact).
//
// Tiled (diffusers' tiled_encode, nn/vae_tiles.h encode_tile_grid): tiles
// of tile_sample_min pixels every tile_sample_stride pixels, each encoded
// on a fresh cache in the same chunks, blended over the latent overlap; the
// means are blended and then normalised. Tile sizes must be multiples of
// the network factor (8), in patches for a patch_size.
//
// The latents returned are the mode (the mean channels), normalised as
// WanImageToVideoPipeline does: (mode - latents_mean) * (1 / latents_std),
// the reciprocal in float32.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/autoencoder_kl_wan.h"
#include "models/nn/causal_conv3d.h"
#include "models/nn/causal_resnet.h"
#include "models/nn/conv.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/vae_tiles.h"
#include "models/placement.h"
#include "models/vae_decoder_parts.h"
#include "models/vae_spec.h"
#include "models/wan_vae_blocks.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// One level of the encoder: its residual blocks, then (all but the last) a
// downsample.
struct WanDownLevel {
  std::vector<nn::WanResidualBlock> resnets;  // num_res_blocks
  bool downsample = false;
  bool temporal = false;                 // downsample3d (time_conv) rather than downsample2d
  nn::Conv3d resample;                   // resample.1: (C, C, 3, 3), held (C, C, 1, 3, 3)
  nn::CausalTimeDownsample time_conv;    // (C, C, 3, 1, 1); temporal only
  // is_residual: AvgDown3D of the level's input, (Cout, Cin, ft, fs, fs)
  // of 1/group each, ft = 2 on a temporal level, fs = 2 but on the last;
  // none when it is the identity (the last level at one channel count).
  bool avg_shortcut = false;
  Tensor avg_weight;
};

class AutoencoderKLWanEncoder final : public VaeEncoder {
 public:
  using Cache = nn::CausalCache;
  static constexpr CausalVaeNames kNames = {"Wan VAE encoder", "chunk"};
  // diffusers' _encode: after the first frame, this many frames per chunk.
  static constexpr int64_t kChunkFrames = 4;

  // Every encoder tensor under `cfg` (encoder.* and quant_conv), whole as stored.
  static nn::TensorDecls encoder_tensors(const AutoencoderKLWanConfig& cfg);
  // encoder_tensors against the store, nothing read; ModelError for an
  // encoder tensor the config does not account for, ConfigError "not
  // supported yet" for a config the encoder cannot run (num_res_blocks 0,
  // a temporal factor over 4).
  static void check(const io::WeightStore& weights, const AutoencoderKLWanConfig& cfg);
  // check(), then loads onto `place` (convolution weights in the compute
  // dtype, the rest float32 on the CPU; on CUDA everything in the
  // placement's dtype).
  static AutoencoderKLWanEncoder load(const io::WeightStore& weights, const AutoencoderKLWanConfig& cfg,
                                      const Placement& place = {});

  // One chunk (1, in_channels, n, H, W) on the placement, patches already
  // channels (n = 1 on a fresh cache, kChunkFrames after; H, W multiples of
  // the network factor f, the same for every chunk of a cache) through the
  // encoder and quant_conv -> (1, 2 z_dim, n == 1 ? 1 : n /
  // temporal_factor(), H/f, W/f) on the placement: the distribution's
  // parameters (mean | logvar).
  Tensor encode_chunk(const Tensor& x, Cache& cache) const;

  // VaeEncoder: (image channels, 1 + 4k, H, W) -> normalised mode (z_dim,
  // 1 + 4k / temporal_factor(), H/f, W/f), host float32 (f the spatial
  // factor, patches included); RuntimeFailure for another shape or a tile
  // grid whose tiles are not whole latents (in patches, for a patch_size).
  Tensor encode(const Tensor& video, const std::optional<nn::TileGrid>& tiles = std::nullopt) const override;
  // The same before the normalisation: the mode (mean channels), untiled or tiled.
  Tensor encode_mode(const Tensor& video, const std::optional<nn::TileGrid>& tiles = std::nullopt) const;

  const AutoencoderKLWanConfig& config() const { return cfg_; }
  int64_t causal_convs() const { return static_cast<int64_t>(slots_.size()); }

 private:
  // Rows [y0, y0 + th) x cols [x0, x0 + tw) of every frame through a fresh
  // cache in the chunks -> the mode (z_dim, T', th/f, tw/f), host float32.
  Tensor encode_region(const Tensor& video, int64_t y0, int64_t th, int64_t x0, int64_t tw) const;
  Tensor downsample(Tensor x, const WanDownLevel& level, Cache& cache) const;
  // AvgDown3D of a level's input x (1, Cin, T, H, W).
  Tensor avg_down(const Tensor& x, const WanDownLevel& level) const;

  Placement place_;
  AutoencoderKLWanConfig cfg_;
  std::vector<CausalSlot> slots_;  // one per causal conv in the order encode_chunk runs them, scale vs the latent grid

  nn::CausalConv3d conv_in_;        // (dims[0], in_channels, 3, 3, 3)
  std::vector<WanDownLevel> levels_;
  WanMidBlock mid_;                 // at dims[-1]
  nn::ChannelRmsNorm norm_out_;     // gamma (dims[-1], 1, 1, 1)
  nn::CausalConv3d conv_out_;       // (2 z_dim, dims[-1], 3, 3, 3)
  nn::Conv3d quant_;                // (2 z_dim, 2 z_dim, 1, 1, 1)
};

}  // namespace ditgen::models
