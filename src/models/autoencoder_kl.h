// AutoencoderKL: the decoder half of diffusers' AutoencoderKL, on the CPU
// (float32 or bfloat16 compute) or CUDA (models::Placement), and its spec for
// the VAE seam (models/vae_spec.h): no time axis (a video is decoded frame by
// frame, LattePipeline's decode_chunk_size frames at a time), one scaling
// factor.
// Structure (diffusers Decoder): post_quant_conv (1x1), conv_in (3x3), a mid
// block (resnet, single-head self-attention over the H*W pixels, resnet),
// one UpDecoderBlock2D per entry of reversed(block_out_channels) with
// layers_per_block + 1 resnets and a nearest-x2 + 3x3 conv upsampler (all but
// the last), then GroupNorm + SiLU and conv_out. Every GroupNorm uses
// norm_num_groups and eps 1e-6.
// A composition of the modules of models/nn/: Conv2d, GroupNorm,
// ResnetBlock2D and PixelAttention, whose declarations (decoder_tensors)
// are checked by name and shape before anything is loaded, a decoder
// tensor the config does not account for refused. The mid-block attention
// also accepts the names of checkpoints saved before diffusers 0.14
// (query/key/value/proj_attn), stored as linears [C, C] or 1x1 convs [C, C,
// 1, 1] (nn::PixelAttention's separate form).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/config_spec.h"
#include "models/nn/conv.h"
#include "models/nn/norm.h"
#include "models/nn/pixel_attention.h"
#include "models/nn/resnet2d.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/upsample_conv.h"
#include "models/placement.h"
#include "models/vae_spec.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct AutoencoderKLConfig {
  int64_t in_channels = 3;       // image channels the encoder takes (unused by the decoder)
  int64_t out_channels = 3;      // image channels decoded
  int64_t latent_channels = 4;
  int64_t layers_per_block = 1;  // the decoder's up blocks hold layers_per_block + 1 resnets
  int64_t norm_num_groups = 32;
  std::vector<int64_t> block_out_channels = {64};  // encoder order; the decoder walks it reversed
  float scaling_factor = 0.18215f;
  bool use_post_quant_conv = true;
  bool mid_block_add_attention = true;
  // diffusers' force_upcast (default true): a float16 pipeline decodes with
  // the VAE in float32 (its GroupNorm and attention overflow in float16).
  bool force_upcast = true;
  // The sample side diffusers' tiling defaults derive from (an int, or the
  // first of a list); diffusers' default 32.
  int64_t sample_size = 32;

  // Spatial upsampling factor of the decoder: 2^(len(block_out_channels) - 1).
  int64_t scale_factor() const { return int64_t{1} << (block_out_channels.size() - 1); }

  // Reads vae/config.json (_class_name AutoencoderKL; absent keys take
  // diffusers' defaults, as from_config does). ModelError naming `path` and
  // the key for anything mistyped or unsupported, such as a non-null
  // shift_factor (the DiT-family pipelines never apply one).
  static AutoencoderKLConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

// UpDecoderBlock2D: its resnets, then (all but the last block) nearest x2
// and the upsampler's 3x3 conv.
struct VaeUpBlock {
  std::vector<nn::ResnetBlock2D> resnets;  // layers_per_block + 1
  nn::UpsampleConv2d upsampler;            // (C, C, 3, 3) as four 2x2 phases; undefined for the last block
};

class AutoencoderKL {
 public:
  // Every tensor the decoder reads under `cfg` (post_quant_conv and
  // decoder.*), whole as stored.
  static nn::TensorDecls decoder_tensors(const AutoencoderKLConfig& cfg);
  // decoder_tensors against the store (check_decoder_tensors), nothing read.
  static void check(const io::WeightStore& weights, const AutoencoderKLConfig& cfg);
  // check(), then loads onto `place` (models/placement.h: convolution weights and the
  // attention's q/k/v projection in the compute dtype, the rest float32 on
  // the CPU; on CUDA everything uploaded once in the placement's dtype).
  static AutoencoderKL load(const io::WeightStore& weights, const AutoencoderKLConfig& cfg, const Placement& place = {});

  // latents (B, latent_channels, h, w), host float32, ALREADY divided by scaling_factor
  // -> (B, out_channels, h*f, w*f)
  // with f = scale_factor(), raw (not clamped), host float32. Images are decoded one at a
  // time, so peak memory does not grow with the batch.
  Tensor decode(const Tensor& latents) const;

  const AutoencoderKLConfig& config() const { return cfg_; }

 private:
  Tensor decode_one(const Tensor& z) const;  // (1, latent_channels, h, w)
  Tensor attention(const Tensor& x) const;   // the mid block's, plus x

  Placement place_;
  AutoencoderKLConfig cfg_;
  nn::Conv2d post_quant_;                  // (L, L, 1, 1); undefined without post_quant_conv
  nn::Conv2d conv_in_;                     // (C_last, L, 3, 3)
  nn::ResnetBlock2D mid_resnet0_, mid_resnet1_;  // C_last -> C_last
  nn::GroupNorm mid_attn_norm_;            // (C_last); undefined when mid_block_add_attention is false
  nn::PixelAttention mid_attn_;            // (C_last) channels, one head
  std::vector<VaeUpBlock> up_blocks_;      // channels reversed(block_out_channels)
  nn::GroupNorm norm_out_;                 // (C_0)
  nn::Conv2d conv_out_;                    // (out_channels, C_0, 3, 3)
};

// The seam's view of an AutoencoderKL directory (vae/config.json).
class AutoencoderKLSpec final : public ConfigSpec<VaeSpec, AutoencoderKLConfig> {
 public:
  using ConfigSpec::ConfigSpec;
  const char* family() const override { return "autoencoder_kl"; }
  int64_t latent_channels() const override { return cfg_.latent_channels; }
  int64_t out_channels() const override { return cfg_.out_channels; }
  int64_t spatial_factor() const override { return cfg_.scale_factor(); }
  LatentNormalization normalization() const override { return {cfg_.scaling_factor, {}, {}}; }
  bool force_upcast() const override { return cfg_.force_upcast; }
  // LattePipeline's decode_chunk_size default.
  int64_t chunk_latent_frames() const override { return 14; }
  // AutoencoderKL.__init__: sample_size x sample_size tiles overlapping by
  // a quarter (tile_overlap_factor 0.25): stride m - int(m / 4).
  nn::TileSampleSizes default_tile_sizes() const override {
    const int64_t m = cfg_.sample_size;
    return {m, m, m - m / 4, m - m / 4};
  }
  // One image at a time; at full resolution the last upsampler's
  // (block_out_channels[1]) channels into block_out_channels[0].
  double decode_bytes(int64_t h, int64_t w) const override {
    const std::vector<int64_t>& c = cfg_.block_out_channels;
    const int64_t f = cfg_.scale_factor();
    return full_resolution_bytes(h * f * w * f, 1, c.size() > 1 ? c[1] : c[0], c[0], 0);
  }
  int64_t decoder_params() const override { return declared_elements(AutoencoderKL::decoder_tensors(cfg_)); }
  void check_weights(const io::WeightStore& weights) const override { AutoencoderKL::check(weights, cfg_); }
  std::unique_ptr<VaeDecoder> load(const io::WeightStore& weights, const Placement& place) const override;
};

// The registry's factory: parses vae/config.json (AutoencoderKLConfig::from_json).
std::unique_ptr<VaeSpec> make_autoencoder_kl_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
