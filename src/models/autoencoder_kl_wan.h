// AutoencoderKLWan: the decoder half of diffusers' AutoencoderKLWan (Wan 2.1's
// causal 3-D VAE, also Wan 2.2 A14B's), on the CPU (float32, or bfloat16
// convolution weights under model.vae_dtype) or CUDA (models::Placement),
// and its spec for the VAE seam (models/vae_spec.h): per-channel latent
// normalisation, temporal factor 2^(temporal upsamplers) (4: frames 1 + 4k),
// one latent frame per Stream::next through the causal feature cache.
//
// Structure (diffusers 0.42.1 WanDecoder3d, is_residual false): a 1x1x1
// post_quant_conv; conv_in (causal 3x3x3, z_dim -> dims[0]); the mid block
// (residual block, single-head attention within each frame, residual block);
// one WanUpBlock per dim_mult entry, reversed: num_res_blocks + 1 residual
// blocks, then (all but the last) a WanResample: "upsample3d" where
// temperal_downsample reversed says so (a causal (3,1,1) time conv to 2C
// channels interleaved into twice the frames, then per frame nearest x2 +
// 3x3 conv to C/2), else "upsample2d" (per frame nearest x2 + 3x3 conv to
// C/2); then RMS norm + SiLU and conv_out (causal 3x3x3 -> out_channels).
// dims = decoder_base_dim (or base_dim) * [dim_mult[-1]] + reversed(dim_mult);
// every up block after the first takes half its nominal input channels (the
// upsampler's C/2). A residual block: RMS norm + SiLU, causal conv, RMS norm
// + SiLU, causal conv, plus the input (through a 1x1x1 conv when the
// channel count changes). Every norm is WanRMS_norm (x / ||x||_channels *
// sqrt(C) * gamma, no bias).
// A composition of the modules of models/nn/ (WanResidualBlock,
// CausalConv3d, Conv2d/Conv3d, ChannelRmsNorm) and the mid block the
// encoder shares (models/wan_vae_blocks.h),
// whose declarations (decoder_tensors, sized from vae/config.json) are
// checked by name and shape before any is loaded; a decoder tensor the
// config does not account for is an error. The encoder's tensors are never
// read here (the encoder: models/autoencoder_kl_wan_encoder.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/config_spec.h"
#include "models/nn/causal_conv3d.h"
#include "models/nn/causal_resnet.h"
#include "models/nn/conv.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/upsample_conv.h"
#include "models/placement.h"
#include "models/vae_decoder_parts.h"
#include "models/vae_spec.h"
#include "models/wan_vae_blocks.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct AutoencoderKLWanConfig {
  int64_t base_dim = 96;
  int64_t decoder_base_dim = 96;  // null / absent: base_dim (diffusers)
  int64_t z_dim = 16;
  std::vector<int64_t> dim_mult = {1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  // Encoder order, one entry per downsampling level (len(dim_mult) - 1);
  // the decoder walks it reversed (temperal_upsample).
  std::vector<bool> temperal_downsample = {false, true, true};
  std::vector<float> latents_mean, latents_std;  // z_dim each (diffusers' Wan 2.1 defaults for z_dim 16)
  int64_t in_channels = 3;   // the encoder's (unused by the decoder)
  int64_t out_channels = 3;
  // Not a diffusers AutoencoderKLWan key; read when present (default true:
  // a float16 model.vae_dtype decodes in float32, as for AutoencoderKL).
  bool force_upcast = true;

  // Pixels per latent, each side: 2^(len(dim_mult) - 1) (8).
  int64_t spatial_factor() const { return int64_t{1} << (dim_mult.size() - 1); }
  // Frames per latent frame after the first: 2^(temporal upsamplers) (4).
  int64_t temporal_factor() const;
  // Whether up block i (decoder order) ends in an upsample3d (time x2).
  bool temporal_upsample(size_t i) const { return temperal_downsample[temperal_downsample.size() - 1 - i]; }
  // Channels of WanDecoder3d's `dims` (len(dim_mult) + 1 entries).
  std::vector<int64_t> dims() const;

  // Reads vae/config.json (_class_name AutoencoderKLWan; absent or null keys
  // take diffusers' defaults, as from_config does). ModelError naming `path`
  // and the key for anything mistyped, inconsistent (latents_mean / std
  // length, temperal_downsample length, scale_factor_* against the
  // structure, dropout != 0) or unknown to diffusers' AutoencoderKLWan;
  // ConfigError "not supported yet: ..." (exit 2) for what diffusers builds
  // and ditgen does not: is_residual true (Wan 2.2 TI2V's VAE), a
  // patch_size, non-empty attn_scales, clip_output false.
  static AutoencoderKLWanConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

struct WanUpBlock {
  std::vector<nn::WanResidualBlock> resnets;  // num_res_blocks + 1
  bool upsample = false;                      // all but the last block
  bool temporal = false;                      // upsample3d (time_conv) rather than upsample2d
  nn::CausalConv3d time_conv;                 // (2C, C, 3, 1, 1); temporal only
  nn::UpsampleConv2d resample;                // resample.1: (C/2, C, 3, 3) as four 2x2 phases
};

// Placement, config, Cache, decode() of a whole video and the seam's Stream
// come from CausalVae (models/vae_decoder_parts.h).
class AutoencoderKLWan : public CausalVae<AutoencoderKLWan, AutoencoderKLWanConfig> {
 public:
  static constexpr CausalVaeNames kNames = {"Wan VAE", "frame"};

  // Every decoder tensor under `cfg` (post_quant_conv and decoder.*), whole
  // as stored.
  static nn::TensorDecls decoder_tensors(const AutoencoderKLWanConfig& cfg);
  // decoder_tensors against the store (check_decoder_tensors), nothing read.
  static void check(const io::WeightStore& weights, const AutoencoderKLWanConfig& cfg);
  // check(), then loads onto `place` (convolution weights and the attention's fused qkv
  // in the compute dtype, the rest float32 on the CPU; on CUDA everything
  // in the placement's dtype).
  static AutoencoderKLWan load(const io::WeightStore& weights, const AutoencoderKLWanConfig& cfg,
                               const Placement& place = {});

  // The Cache (CausalCache) is the causal feature cache of one video's
  // decode: the last two input frames of every causal 3x3x3 / (3,1,1) conv,
  // kept between latent frames, one slot per conv in diffusers' feat_idx
  // order. All of it is allocated at the first frame, before any
  // activation, at its exact size (zeros: CausalPad::kZeros, the causal
  // padding), and updated in place; `started` (a latent frame has been
  // decoded) also says the time convs run, from the second frame on.

  // One chunk, always one latent frame (1, z_dim, 1, h, w), on the
  // placement, ALREADY un-normalised, through post_quant_conv and the
  // decoder with `cache` (diffusers' _decode loop body): -> (1,
  // out_channels, T, 8h, 8w) on the placement, raw (not clamped), T = 1 for
  // the first frame of a cache and temporal_factor() after.
  Tensor decode_chunk(const Tensor& z, Cache& cache) const;

  // decode() gives (1, out_channels, 1 + 4 (F - 1), 8h, 8w) for F latent
  // frames: what diffusers' AutoencoderKLWan.decode gives before its clamp.
  // Both it and the Stream run one decode_chunk per latent frame, whatever
  // the chunk they are given.
  ChunkedDecode chunked(int64_t latent_frames, const Cache& cache, bool stream) const;
  int64_t latent_channels() const { return cfg_.z_dim; }

 private:
  Tensor upsample(Tensor x, const WanUpBlock& b, Cache& cache) const;

  nn::Conv3d post_quant_;                          // (z, z, 1, 1, 1)
  nn::CausalConv3d conv_in_;                       // (dims[0], z, 3, 3, 3)
  WanMidBlock mid_;                                // at dims[0]
  std::vector<WanUpBlock> up_blocks_;
  nn::ChannelRmsNorm norm_out_;                    // gamma (C_last, 1, 1, 1)
  nn::CausalConv3d conv_out_;                      // (out_channels, C_last, 3, 3, 3)
};

// The seam's view of an AutoencoderKLWan directory (vae/config.json); out
// channels, factors, force_upcast and the load are CausalVaeSpec's.
class AutoencoderKLWanSpec final : public CausalVaeSpec<AutoencoderKLWan> {
 public:
  using CausalVaeSpec::CausalVaeSpec;
  const char* family() const override { return "autoencoder_kl_wan"; }
  int64_t latent_channels() const override { return cfg_.z_dim; }
  // WanPipeline: latents / (1 / latents_std) + latents_mean, per channel.
  LatentNormalization normalization() const override { return {1.0f, cfg_.latents_mean, cfg_.latents_std}; }
  // diffusers' _decode: one latent frame per decoder call.
  int64_t chunk_latent_frames() const override { return 1; }
  // AutoencoderKLWan.__init__: 256 x 256 tiles every 192 pixels.
  nn::TileSampleSizes default_tile_sizes() const override { return {256, 256, 192, 192}; }
  // docs/vae-wan.md#memory's account: every causal conv's two cached
  // frames at its level, plus the transient at the peak, 7 frames' worth of
  // temporal_factor() full-resolution frames of dims[-1] channels.
  double decode_bytes(int64_t h, int64_t w) const override;
  // The original release's names (ComfyUI's wan_2.1_vae.safetensors:
  // decoder.upsamples.N ...), mapped as diffusers' convert_wan_vae_to_diffusers
  // maps them (models/wan_vae_names.h); diffusers' names otherwise.
  io::SingleFileOptions single_file_options() const override;
  // The encoder (models/autoencoder_kl_wan_encoder.h), from the same
  // weights (either naming).
  std::unique_ptr<VaeEncoder> load_encoder(const io::WeightStore& weights, const Placement& place) const override;
};

// The registry's factory: parses vae/config.json (AutoencoderKLWanConfig::from_json).
std::unique_ptr<VaeSpec> make_autoencoder_kl_wan_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
