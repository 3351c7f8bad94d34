// One output's latents through a VAE decoder (the VAE seam, vae_spec.h),
// whole or in spatial tiles: the loop Pipeline::decode and
// bench_vae_decode share.
//
// Untiled: the latent frames go through one Stream in the VAE's
// latent_chunks(), each chunk's frames written as they come. Tiled (as
// diffusers' tiled_decode, nn/vae_tiles.h): for each tile in raster order
// a fresh Stream (a causal VAE's feature cache starts over per tile, as
// diffusers' clear_cache per tile) decodes all its latent frames in the
// same chunks; the tile is blended with the kept bottom rows of the tile
// above and the kept right columns of the tile to its left, and its first
// keep x keep pixels are written; a VAE with a patch_size (Wan 2.2 TI2V's)
// is blended in its patches, before they become pixels, as diffusers
// blends it. What is held besides the output is one
// tile's frames and the last `blend` rows of one row of tiles: memory is
// bounded by the tile, not by the image.
#pragma once
#include <cstdint>
#include <optional>

#include "models/nn/vae_tiles.h"
#include "models/vae_spec.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// latents (C, F', h, w), host float32, already un-normalised -> `out`, a
// host float32 (F, out_channels, h*f, w*f) tensor (F = spec.frames_of(F')),
// the raw frames (about [-1, 1], not clamped). With `tiles`, tiled as
// diffusers' tiled_decode (whatever the latent's size: the caller decides
// when to tile, needs_tiles()).
void decode_latents(const VaeDecoder& decoder, const VaeSpec& spec, const Tensor& latents, Tensor& out,
                    const std::optional<nn::TileGrid>& tiles = std::nullopt);

}  // namespace ditgen::models
