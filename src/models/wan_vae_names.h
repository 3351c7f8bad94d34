// The Wan VAE's tensor names in the original release (Wan-AI's
// wan/modules/vae.py, as ComfyUI's wan_2.1_vae.safetensors keeps them)
// mapped to diffusers' AutoencoderKLWan names (what models/autoencoder_kl_wan.h
// loads), as diffusers 0.42.1's convert_wan_vae_to_diffusers
// (loaders/single_file_utils.py) maps them:
//
//   conv1, conv2                       quant_conv, post_quant_conv
//   {encoder,decoder}.conv1            .conv_in
//   {encoder,decoder}.middle.0 / .2    .mid_block.resnets.0 / .1
//   {encoder,decoder}.middle.1         .mid_block.attentions.0 (norm, to_qkv, proj)
//   {encoder,decoder}.head.0 / .2      .norm_out / .conv_out
//   encoder.downsamples.K              encoder.down_blocks.K
//   decoder.upsamples.K                decoder.up_blocks.i.resnets.j, or .up_blocks.i.upsamplers.0
//
// and inside a residual block residual.0 / .2 / .3 / .6 -> norm1 / conv1 /
// norm2 / conv2, shortcut -> conv_shortcut. The decoder's `upsamples` is
// one flat list: per up block its resnets_per_block residual blocks
// (num_res_blocks + 1), then, in every block but the last, its resample
// (resample.1, time_conv). diffusers writes that walk out for the
// published layout (num_res_blocks 2, four up blocks: residual blocks at
// 0-2, 4-6, 8-10, 12-14, upsamplers at 3, 7, 11, the one shortcut at 4);
// here it follows the config, which gives the same names for that layout.
//
// Wan 2.2 TI2V's VAE (Wan2.2_VAE.pth, ComfyUI's wan2.2_vae.safetensors;
// is_residual) nests its blocks, as diffusers' scripts/convert_wan_to_diffusers.py
// convert_vae_22 maps them:
//
//   encoder.downsamples.X.downsamples.Y   encoder.down_blocks.X.resnets.Y (residual, shortcut)
//                                         or .down_blocks.X.downsampler (resample, time_conv; Y dropped)
//   decoder.upsamples.X.upsamples.Y       decoder.up_blocks.X.resnets.Y, or .up_blocks.X.upsampler
//
// and the rest as Wan 2.1's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ditgen::models {

// "decoder.upsamples.4.shortcut.weight" -> "decoder.up_blocks.1.resnets.0.conv_shortcut.weight"
// for a decoder of `up_blocks` up blocks of `resnets_per_block` residual
// blocks each; nullopt for a name that is no tensor of such a VAE.
std::optional<std::string> wan_vae_original_to_diffusers(std::string_view name, int64_t resnets_per_block,
                                                         int64_t up_blocks);

// "decoder.upsamples.2.upsamples.3.resample.1.weight" ->
// "decoder.up_blocks.2.upsampler.resample.1.weight" (Wan 2.2's layout, any
// sizes); nullopt for a name that is no tensor of such a VAE.
std::optional<std::string> wan22_vae_original_to_diffusers(std::string_view name);

}  // namespace ditgen::models
