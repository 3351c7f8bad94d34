// diffusers' AutoencoderKLWan patchify / unpatchify (patch_size p, Wan 2.2
// TI2V's VAE: p = 2), on host float32 tensors: the encoder takes a video's
// p x p pixel patches as channels, the decoder makes them. Channel
// (c p + i) p + j of a patched tensor holds pixel (y p + j, x p + i) of
// image channel c: the column offset i before the row offset j, as
// diffusers' permutes have it.
//
// Both work on (N, C, S, H, W) (N and S batch dimensions on either side of
// the channels: (1, C, F, H, W) videos, (F, C, 1, H, W) frames first) and
// only move values, so a clamp or any per-value map commutes with them.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace ditgen::models::nn {

// (N, C, S, H, W) -> (N, C p^2, S, H/p, W/p); std::invalid_argument unless
// host float32 5-D with H and W multiples of p.
Tensor patchify_pixels(const Tensor& x, int64_t p);
// (N, C p^2, S, h, w) -> (N, C, S, h p, w p), patchify_pixels' inverse;
// std::invalid_argument unless host float32 5-D with channels a multiple of p^2.
Tensor unpatchify_pixels(const Tensor& x, int64_t p);

}  // namespace ditgen::models::nn
