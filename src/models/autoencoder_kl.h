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
// Sizes come from vae/config.json; every tensor is checked by name and shape
// before any is loaded. The mid-block attention also accepts the names of
// checkpoints saved before diffusers 0.14 (query/key/value/proj_attn, as
// diffusers' _fix_state_dict_keys_on_load renames them), stored as linears
// [C, C] or 1x1 convs [C, C, 1, 1].
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/config_spec.h"
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

  // Spatial upsampling factor of the decoder: 2^(len(block_out_channels) - 1).
  int64_t scale_factor() const { return int64_t{1} << (block_out_channels.size() - 1); }

  // Reads vae/config.json (_class_name AutoencoderKL; absent keys take
  // diffusers' defaults, as from_config does). ModelError naming `path` and
  // the key for anything mistyped or unsupported, such as a non-null
  // shift_factor (the DiT-family pipelines never apply one).
  static AutoencoderKLConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

// ResnetBlock2D without time embedding: GN+SiLU, conv, GN+SiLU, conv, plus
// the input (through a 1x1 conv when the channel count changes).
struct VaeResnet {
  Tensor norm1_w, norm1_b;        // (Cin), (Cin)
  Tensor conv1_w, conv1_b;        // (Cout, Cin, 3, 3), (Cout)
  Tensor norm2_w, norm2_b;        // (Cout), (Cout)
  Tensor conv2_w, conv2_b;        // (Cout, Cout, 3, 3), (Cout)
  Tensor shortcut_w, shortcut_b;  // (Cout, Cin, 1, 1), (Cout); undefined when Cin == Cout
};

// Single-head self-attention of the mid block, with q/k/v fused into one
// projection so one GEMM reads the normed feature map once.
struct VaeAttention {
  Tensor norm_w, norm_b;  // (C), (C)
  Tensor qkv_w, qkv_b;    // (3C, C), (3C)   rows: to_q, to_k, to_v
  Tensor out_w, out_b;    // (C, C), (C)     to_out.0
};

struct VaeUpBlock {
  std::vector<VaeResnet> resnets;  // layers_per_block + 1
  Tensor up_w, up_b;               // (C, C, 3, 3), (C); undefined for the last block
};

class AutoencoderKL {
 public:
  // Validates every tensor name and shape against `cfg`, then loads onto
  // `place` (models/placement.h: convolution weights and the attention's
  // q/k/v projection in the compute dtype, the rest float32 on the CPU;
  // on CUDA everything uploaded once in the placement's dtype).
  static AutoencoderKL load(const io::WeightStore& weights, const AutoencoderKLConfig& cfg, const Placement& place = {});

  // latents (B, latent_channels, h, w), host float32, ALREADY divided by scaling_factor
  // -> (B, out_channels, h*f, w*f)
  // with f = scale_factor(), raw (not clamped), host float32. Images are decoded one at a
  // time, so peak memory does not grow with the batch.
  Tensor decode(const Tensor& latents) const;

  const AutoencoderKLConfig& config() const { return cfg_; }

 private:
  Tensor decode_one(const Tensor& z) const;  // (1, latent_channels, h, w)
  Tensor resnet(const Tensor& x, const VaeResnet& r) const;
  Tensor attention(const Tensor& x, const VaeAttention& a) const;
  Tensor ones_row(int64_t n) const;  // (1, n) of ones on the placement

  Placement place_;
  AutoencoderKLConfig cfg_;
  Tensor post_quant_w, post_quant_b;  // (L, L, 1, 1), (L); undefined without post_quant_conv
  Tensor conv_in_w, conv_in_b;        // (C_last, L, 3, 3), (C_last)
  VaeResnet mid_resnet0, mid_resnet1;
  std::optional<VaeAttention> mid_attn;  // absent when mid_block_add_attention is false
  std::vector<VaeUpBlock> up_blocks;     // channels reversed(block_out_channels)
  Tensor norm_out_w, norm_out_b;         // (C_0), (C_0)
  Tensor conv_out_w, conv_out_b;         // (out_channels, C_0, 3, 3), (out_channels)
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
  std::unique_ptr<VaeDecoder> load(const io::WeightStore& weights, const Placement& place) const override;
};

// The registry's factory: parses vae/config.json (AutoencoderKLConfig::from_json).
std::unique_ptr<VaeSpec> make_autoencoder_kl_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
