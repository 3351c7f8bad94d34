// AutoencoderKLWan: the decoder half of diffusers' AutoencoderKLWan (Wan 2.1's
// causal 3-D VAE, also Wan 2.2 A14B's; with is_residual and patch_size 2,
// Wan 2.2 TI2V-5B's), on the CPU (float32, or bfloat16 convolution weights
// under model.vae_dtype) or CUDA (models::Placement), and its spec for the
// VAE seam (models/vae_spec.h): per-channel latent normalisation, temporal
// factor 2^(temporal upsamplers) (4: frames 1 + 4k), one latent frame per
// Stream::next through the causal feature cache.
//
// Structure (diffusers 0.42.1 WanDecoder3d): a 1x1x1 post_quant_conv;
// conv_in (causal 3x3x3, z_dim -> dims[0]); the mid block (residual block,
// single-head attention within each frame, residual block); one up block
// per dim_mult entry, reversed: num_res_blocks + 1 residual blocks, then
// (all but the last) a WanResample: "upsample3d" where temperal_downsample
// reversed says so (a causal (3,1,1) time conv to 2C channels interleaved
// into twice the frames, then per frame nearest x2 + 3x3 conv), else
// "upsample2d" (per frame nearest x2 + 3x3 conv); then RMS norm + SiLU and
// conv_out (causal 3x3x3 -> out_channels).
// dims = decoder_base_dim (or base_dim) * [dim_mult[-1]] + reversed(dim_mult).
// Wan 2.1 (is_residual false, WanUpBlock, "upsamplers.0."): the upsampler's
// conv goes to C/2, so every up block after the first takes half its
// nominal input channels. Wan 2.2 (is_residual true, WanResidualUpBlock,
// "upsampler."): the conv keeps C, every block takes dims[i], and a block
// that upsamples adds diffusers' DupUp3D of its input (channels repeated,
// then spread over the 2 x 2 pixels and the time factor's frames; the
// first latent frame keeps only the last of those frames) to its output.
// A residual block: RMS norm + SiLU, causal conv, RMS norm + SiLU, causal
// conv, plus the input (through a 1x1x1 conv when the channel count
// changes). Every norm is WanRMS_norm (x / ||x||_channels * sqrt(C) *
// gamma, no bias).
// patch_size p (Wan 2.2: 2): the decoder makes out_channels = 3 p^2
// channels at 2^(levels - 1) per latent, diffusers' unpatchify turns them
// into 3 channels at p times the pixels (to_pixels, on the host), so the
// seam's spatial factor is 2^(levels - 1) p (16) and its out_channels 3.
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
  int64_t in_channels = 3;   // the encoder's (unused by the decoder); p^2 x the image's channels
  int64_t out_channels = 3;  // the decoder's, p^2 x the image's channels
  bool is_residual = false;  // Wan 2.2 TI2V's residual up / down blocks
  int64_t patch_size = 1;    // p: null / absent 1; Wan 2.2 TI2V 2
  // Not a diffusers AutoencoderKLWan key; read when present (default true:
  // a float16 model.vae_dtype decodes in float32, as for AutoencoderKL).
  bool force_upcast = true;

  // The decoder's own upsampling (the encoder's downsampling), each side:
  // 2^(len(dim_mult) - 1) (8), in patches.
  int64_t network_factor() const { return int64_t{1} << (dim_mult.size() - 1); }
  // Pixels per latent, each side: network_factor() * patch_size (8; Wan 2.2 TI2V 16).
  int64_t spatial_factor() const { return network_factor() * patch_size; }
  // The image's channels: out_channels / p^2 (3).
  int64_t image_channels() const { return out_channels / (patch_size * patch_size); }
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
  // structure, in / out_channels not a multiple of patch_size^2, residual
  // blocks whose shortcut channels do not divide as diffusers asserts) or
  // unknown to diffusers' AutoencoderKLWan; ConfigError "not supported yet:
  // ..." (exit 2) for what diffusers builds and ditgen does not: a
  // patch_size other than 1 or 2, non-empty attn_scales, dropout != 0, a
  // residual up block repeating its channels an odd number of times.
  // clip_output (Wan 2.2's configs say false) is read and ignored, as
  // diffusers 0.42.1 ignores it: the pipeline always clamps.
  static AutoencoderKLWanConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

struct WanUpBlock {
  std::vector<nn::WanResidualBlock> resnets;  // num_res_blocks + 1
  bool upsample = false;                      // all but the last block
  bool temporal = false;                      // upsample3d (time_conv) rather than upsample2d
  bool dup_shortcut = false;                  // is_residual and upsample: DupUp3D of the input added
  nn::CausalConv3d time_conv;                 // (2C, C, 3, 1, 1); temporal only
  nn::UpsampleConv2d resample;                // resample.1: (C/2, C, 3, 3), is_residual (C, C, 3, 3); as four 2x2 phases
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
  // out_channels, T, 8h, 8w) on the placement (8: network_factor(), in
  // patches), raw (not clamped), T = 1 for
  // the first frame of a cache and temporal_factor() after.
  Tensor decode_chunk(const Tensor& z, Cache& cache) const;

  // decode() gives (1, image_channels(), 1 + 4 (F - 1), f h, f w) for F
  // latent frames (f the spatial factor, patches undone by to_pixels): what
  // diffusers' AutoencoderKLWan.decode gives before its clamp.
  // Both it and the Stream run one decode_chunk per latent frame, whatever
  // the chunk they are given.
  ChunkedDecode chunked(int64_t latent_frames, const Cache& cache, bool stream) const;
  int64_t latent_channels() const { return cfg_.z_dim; }
  // decode_chunk's frames, gathered on the host ((1, out_channels, T, H, W),
  // or (T, out_channels, H, W) frames first), as pixels: diffusers'
  // unpatchify for a patch_size over 1, else as they are.
  Tensor to_pixels(Tensor frames, bool frames_first) const;

 private:
  Tensor upsample(Tensor x, const WanUpBlock& b, Cache& cache) const;
  // diffusers' DupUp3D(C_in, cout, factor_t, 2) of a block's input x (1,
  // C_in, T, H, W) -> (1, cout, T factor_t, 2H, 2W); on a video's first
  // latent frame (first_chunk) only the last of those factor_t frames.
  Tensor dup_up(const Tensor& x, int64_t cout, int64_t factor_t, bool first_chunk) const;

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
  // The image's channels (3), not the patched decoder's.
  int64_t out_channels() const override { return cfg_.image_channels(); }
  int64_t patch_size() const override { return cfg_.patch_size; }
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
  // decoder.upsamples.N ...; with is_residual wan2.2_vae.safetensors:
  // decoder.upsamples.X.upsamples.Y ...), mapped as diffusers'
  // convert_wan_vae_to_diffusers / convert_vae_22 map them
  // (models/wan_vae_names.h); diffusers' names otherwise.
  io::SingleFileOptions single_file_options() const override;
  // The encoder (models/autoencoder_kl_wan_encoder.h), from the same
  // weights (either naming).
  std::unique_ptr<VaeEncoder> load_encoder(const io::WeightStore& weights, const Placement& place) const override;
};

// The registry's factory: parses vae/config.json (AutoencoderKLWanConfig::from_json).
std::unique_ptr<VaeSpec> make_autoencoder_kl_wan_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
