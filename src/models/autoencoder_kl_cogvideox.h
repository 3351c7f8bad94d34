// AutoencoderKLCogVideoX: the decoder half of diffusers' AutoencoderKLCogVideoX
// (CogVideoX 1.0 / 1.5's causal 3-D VAE, diffusers 0.42.1
// models/autoencoders/autoencoder_kl_cogvideox.py), on the CPU (float32, or
// bfloat16 convolution weights under model.vae_dtype) or CUDA
// (models::Placement), and its spec for the VAE seam (models/vae_spec.h): one
// scaling factor, spatial factor 2^(len(block_out_channels) - 1), temporal
// factor 2^log2(temporal_compression_ratio) (4), and diffusers' chunking of the
// latent frames (pairs, the odd remainder in the first chunk), which is part
// of the result: every norm's statistics span a chunk.
//
// Structure (CogVideoXDecoder3D): conv_in (causal 3x3x3, latent_channels ->
// C0); the mid block (two resnets at C0); one CogVideoXUpBlock3D per entry of
// reversed(block_out_channels): layers_per_block + 1 resnets, then (all but
// the last) a CogVideoXUpsample3D, which for the first
// log2(temporal_compression_ratio) blocks also doubles time (compress_time)
// and always doubles H and W, then a per-frame 3x3 conv; then norm_out + SiLU
// and conv_out (causal 3x3x3 -> out_channels). A resnet: spatial norm + SiLU,
// causal conv, spatial norm + SiLU, causal conv, plus the input (through a
// 1x1x1 conv_shortcut when the channel count changes). Every norm is a
// CogVideoXSpatialNorm3D conditioned on the chunk's latents zq: GroupNorm(f)
// * conv_y(zq) + conv_b(zq), zq nearest-resized to f's frames and pixels.
// There is no post_quant_conv in the published VAEs (use_post_quant_conv
// true is refused; see from_json).
// A composition of the modules of models/nn/ (CogVideoXResnetBlock3D with
// its spatial norms, CausalConv3d, Conv3d), whose declarations
// (decoder_tensors, sized from vae/config.json) are checked by name and
// shape before any is loaded; a decoder tensor the config does not account
// for is an error. The encoder's tensors are never read (a file without
// them loads).
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
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "models/vae_decoder_parts.h"
#include "models/vae_spec.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct AutoencoderKLCogVideoXConfig {
  int64_t in_channels = 3;  // the encoder's (unused by the decoder)
  int64_t out_channels = 3;
  int64_t latent_channels = 16;
  std::vector<int64_t> block_out_channels = {128, 256, 256, 512};  // encoder order; the decoder walks it reversed
  int64_t layers_per_block = 3;  // the decoder's up blocks hold layers_per_block + 1 resnets
  int64_t norm_num_groups = 32;
  // The encoder's GroupNorm eps. Every norm of the decoder is a spatial norm,
  // whose GroupNorm diffusers builds with eps 1e-6 whatever norm_eps says:
  // parsed and checked, never used here.
  double norm_eps = 1e-6;
  int64_t temporal_compression_ratio = 4;  // a power of two (diffusers takes int(log2(ratio)))
  int64_t sample_height = 480, sample_width = 720;  // diffusers' tiling sizes only
  float scaling_factor = 1.15258426f;
  bool force_upcast = true;
  // Encoder-side keys the decoder never reads (see from_json).
  bool use_quant_conv = false;
  bool invert_scale_latents = false;

  // Pixels per latent, each side: 2^(len(block_out_channels) - 1) (8).
  int64_t spatial_factor() const { return int64_t{1} << (block_out_channels.size() - 1); }
  // Up blocks that double time: the first log2(temporal_compression_ratio)
  // of those with an upsampler.
  int64_t time_upsamplers() const;
  bool compress_time(size_t up_block) const { return static_cast<int64_t>(up_block) < time_upsamplers(); }
  // Frames per latent frame after the first: 2^time_upsamplers() (4).
  int64_t temporal_factor() const { return int64_t{1} << time_upsamplers(); }
  // Output frames of one decoder call on `n` latent frames: each time
  // upsampler doubles the frames, except that an odd count > 1 keeps its
  // first frame single and one frame stays one (CogVideoXUpsample3D).
  int64_t chunk_frames(int64_t n) const;
  // diffusers' _decode batches: num_latent_frames_batch_size = 2, the
  // remainder in the first ({1}, {2}, {3}, {2, 2}, {3, 2}, ...).
  static std::vector<int64_t> latent_chunks(int64_t latent_frames);

  // Reads vae/config.json (_class_name AutoencoderKLCogVideoX; absent or null
  // keys take diffusers' defaults, as from_config does). ModelError naming
  // `path` and the key for anything mistyped, inconsistent (block types
  // other than CogVideoX{Down,Up}Block3D or not one per block_out_channels
  // entry, norm_num_groups not dividing every block's channels,
  // temporal_compression_ratio not a power of two the blocks can make) or
  // unknown to diffusers' AutoencoderKLCogVideoX; ConfigError "not supported
  // yet: ..." (exit 2) for what diffusers builds and this decoder does not:
  // use_post_quant_conv true, an act_fn other than silu / swish, a non-null
  // shift_factor, latents_mean or latents_std.
  static AutoencoderKLCogVideoXConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

struct CogVideoXUpBlock {
  std::vector<nn::CogVideoXResnetBlock3D> resnets;  // layers_per_block + 1
  bool upsample = false;                            // all but the last block
  bool compress_time = false;                       // the upsampler also doubles time
  // The upsampler's 2-D 3x3 conv, held as (C, C, 1, 3, 3) so one conv3d
  // runs it on every frame of a chunk; upsample only.
  nn::Conv3d up;
};

// Placement, config, Cache, decode() of a whole video and the seam's Stream
// come from CausalVae (models/vae_decoder_parts.h).
class AutoencoderKLCogVideoX : public CausalVae<AutoencoderKLCogVideoX, AutoencoderKLCogVideoXConfig> {
 public:
  static constexpr CausalVaeNames kNames = {"CogVideoX VAE", "chunk"};

  // Every decoder tensor under `cfg` (decoder.*), whole as stored.
  static nn::TensorDecls decoder_tensors(const AutoencoderKLCogVideoXConfig& cfg);
  // decoder_tensors against the store (check_decoder_tensors), nothing read.
  static void check(const io::WeightStore& weights, const AutoencoderKLCogVideoXConfig& cfg);
  // check(), then loads onto `place` (convolution weights in the compute dtype, the rest
  // float32 on the CPU; on CUDA everything in the placement's dtype).
  static AutoencoderKLCogVideoX load(const io::WeightStore& weights, const AutoencoderKLCogVideoXConfig& cfg,
                                     const Placement& place = {});

  // The Cache (CausalCache) holds the conv caches of one video's decode:
  // the last two input frames of every causal 3x3x3 conv, kept between
  // chunks (diffusers' conv_cache; conv_y / conv_b have kernel 1 and need
  // none), one slot per conv in decoder order. Allocated at the first chunk,
  // before any activation, at their exact sizes, and updated in place; until
  // a chunk has been decoded the padding is the chunk's first frame, twice
  // (CausalPad::kFirstFrame).

  // One chunk of n latent frames (1, latent_channels, n, h, w) on the
  // placement, ALREADY unscaled, through the decoder with `cache` (one
  // iteration of diffusers' _decode loop): -> (1, out_channels,
  // chunk_frames(n), 8h, 8w) on the placement, raw (not clamped).
  Tensor decode_chunk(const Tensor& z, Cache& cache) const;

  // decode() takes diffusers' chunks (latent_chunks) and gives
  // AutoencoderKLCogVideoX.decode(z).sample; a Stream::next is one
  // decode_chunk on the n frames it is given (the caller picks the chunks:
  // the spec's latent_chunks are diffusers').
  ChunkedDecode chunked(int64_t latent_frames, const Cache& cache, bool stream) const;
  int64_t latent_channels() const { return cfg_.latent_channels; }

 private:
  Tensor upsample(Tensor x, const CogVideoXUpBlock& b) const;  // CogVideoXUpsample3D

  nn::CausalConv3d conv_in_;                             // (C0, latent_channels, 3, 3, 3)
  std::vector<nn::CogVideoXResnetBlock3D> mid_resnets_;  // 2, C0 -> C0
  std::vector<CogVideoXUpBlock> up_blocks_;
  nn::CogVideoXSpatialNorm norm_out_;                    // over C_last
  nn::CausalConv3d conv_out_;                            // (out_channels, C_last, 3, 3, 3)
};

// The seam's view of an AutoencoderKLCogVideoX directory (vae/config.json);
// out channels, factors and the load are CausalVaeSpec's.
class AutoencoderKLCogVideoXSpec final : public CausalVaeSpec<AutoencoderKLCogVideoX> {
 public:
  using CausalVaeSpec::CausalVaeSpec;
  const char* family() const override { return "autoencoder_kl_cogvideox"; }
  int64_t latent_channels() const override { return cfg_.latent_channels; }
  // A first chunk of n latent frames (n odd) makes 1 + 4 (n - 1) frames and
  // each later pair 8, so only odd latent frame counts give frames_of()'s
  // 1 + 4 (F' - 1): the frame counts it makes are 1 + 8k (49 = 1 + 8 * 6).
  // An even F' would give 4 F' frames (diffusers' _decode does so); those
  // counts are refused by check_frames instead. Without time upsampling
  // every count works (step 1).
  int64_t frame_step() const override { return cfg_.temporal_factor() > 1 ? 2 * cfg_.temporal_factor() : 1; }
  // CogVideoXPipeline.decode_latents: 1 / scaling_factor * latents.
  LatentNormalization normalization() const override { return {cfg_.scaling_factor, {}, {}}; }
  // diffusers' num_latent_frames_batch_size.
  int64_t chunk_latent_frames() const override { return 2; }
  // AutoencoderKLCogVideoX.__init__: tiles of half sample_height x half
  // sample_width, overlapping by 1/6 of their height and 1/5 of their
  // width (tile_overlap_factor_*): as strides, m - int(m / 6) and m - int(m / 5).
  nn::TileSampleSizes default_tile_sizes() const override {
    const int64_t mh = cfg_.sample_height / 2, mw = cfg_.sample_width / 2;
    return {mh, mw, mh - mh / 6, mw - mw / 5};
  }
  // The first chunk (3 latent frames) makes 1 + 2 temporal_factor() frames
  // at full resolution, through the last upsampler (block_out_channels[1])
  // into block_out_channels[0]; the full-resolution causal convs: the last
  // up block's resnets' and conv_out.
  double decode_bytes(int64_t h, int64_t w) const override {
    const std::vector<int64_t>& c = cfg_.block_out_channels;
    const int64_t f = cfg_.spatial_factor();
    return full_resolution_bytes(h * f * w * f, 1 + 2 * cfg_.temporal_factor(), c.size() > 1 ? c[1] : c[0], c[0],
                                 2 * (cfg_.layers_per_block + 1) + 1);
  }
  // CogVideoXPipeline.decode_latents never reads force_upcast: the VAE decodes
  // in the model's dtype (the published configs' force_upcast true included).
  bool force_upcast() const override { return false; }
  std::vector<int64_t> latent_chunks(int64_t latent_frames) const override {
    return AutoencoderKLCogVideoXConfig::latent_chunks(latent_frames);
  }
};

// The registry's factory: parses vae/config.json (AutoencoderKLCogVideoXConfig::from_json).
std::unique_ptr<VaeSpec> make_autoencoder_kl_cogvideox_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
