// See vae_decode.h.
#include "models/vae_decode.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "models/nn/vae_patches.h"
#include "tensor/device_memory.h"

namespace ditgen::models {
namespace {

// The latents [y0, y0 + th) x [x0, x0 + tw) of every frame through a fresh
// stream in the VAE's chunks, into `dest` (F, out_channels, th*f, tw*f).
void decode_region(const VaeDecoder& decoder, const VaeSpec& spec, const Tensor& z, int64_t y0, int64_t th, int64_t x0,
                   int64_t tw, Tensor& dest) {
  const int64_t latent_frames = z.dim(1), f = spec.spatial_factor();
  const int64_t frames = spec.frames_of(latent_frames), per_frame = spec.out_channels() * th * f * tw * f;
  if (dest.numel() != frames * per_frame) throw std::logic_error("decode_latents: a destination of the wrong size");
  const std::unique_ptr<VaeDecoder::Stream> stream = decoder.begin();
  int64_t frame = 0, f0 = 0;
  for (const int64_t chunk : spec.latent_chunks(latent_frames)) {
    if (chunk < 1 || f0 + chunk > latent_frames)
      throw std::logic_error("decode_latents: the VAE's latent_chunks() do not cover its latent frames");
    const Tensor img = stream->next(nn::region_of(z, f0, chunk, y0, th, x0, tw));
    if (img.numel() % per_frame != 0 || frame + img.numel() / per_frame > frames)
      throw std::logic_error("decode_latents: the VAE decoded other frames than frames_of() and its factor say");
    std::memcpy(dest.data() + frame * per_frame, img.data(), static_cast<size_t>(img.numel()) * sizeof(float));
    frame += img.numel() / per_frame;
    f0 += chunk;
  }
  if (frame != frames) throw std::logic_error("decode_latents: the VAE decoded fewer frames than frames_of() says");
}

// diffusers' tiled_decode; for a VAE with a patch_size p it blends the
// tiles as patches (before its unpatchify): blend and keep in patches, the
// decoded tiles patchified back (nn/vae_patches.h: values moved, not
// changed) and the blended image unpatchified into `out`.
void decode_tiled(const VaeDecoder& decoder, const VaeSpec& spec, const Tensor& z, Tensor& out,
                  const nn::TileGrid& grid) {
  const int64_t p = spec.patch_size(), h = z.dim(2), w = z.dim(3), f = spec.spatial_factor();
  const int64_t frames = out.dim(0), channels = out.dim(1), planes = frames * channels;
  if (p == 1) {
    Tensor image = out.reshape({planes, h * f, w * f});
    nn::assemble_tiles(grid, h, w, image, [&](int64_t y0, int64_t th, int64_t x0, int64_t tw) {
      Tensor tile = Tensor::empty({planes, th * f, tw * f});
      decode_region(decoder, spec, z, y0, th, x0, tw, tile);
      // The edge tiles are smaller: blocks cached for one tile's sizes
      // would pile up beside the next's.
      device_memory::release_cached_host();
      return tile;
    });
    return;
  }
  // diffusers: blend m/p - s/p and keep s/p patches, for the pixel grid's
  // blend m - s and keep s (tile sizes multiples of f, so of p).
  nn::TileGrid patched = grid;
  for (nn::TileAxis* axis : {&patched.height, &patched.width}) {
    axis->blend /= p;
    axis->keep /= p;
  }
  const int64_t fp = f / p, patch_planes = planes * p * p;
  Tensor image = Tensor::empty({frames, channels * p * p, 1, h * fp, w * fp});
  Tensor image_planes = image.reshape({patch_planes, h * fp, w * fp});
  nn::assemble_tiles(patched, h, w, image_planes, [&](int64_t y0, int64_t th, int64_t x0, int64_t tw) {
    Tensor tile = Tensor::empty({frames, channels, 1, th * f, tw * f});
    Tensor tile_frames = tile.reshape({frames, channels, th * f, tw * f});
    decode_region(decoder, spec, z, y0, th, x0, tw, tile_frames);
    device_memory::release_cached_host();
    return nn::patchify_pixels(tile, p).reshape({patch_planes, th * fp, tw * fp});
  });
  const Tensor pixels = nn::unpatchify_pixels(image, p);
  std::memcpy(out.data(), pixels.data(), static_cast<size_t>(out.numel()) * sizeof(float));
}

}  // namespace

void decode_latents(const VaeDecoder& decoder, const VaeSpec& spec, const Tensor& latents, Tensor& out,
                    const std::optional<nn::TileGrid>& tiles) {
  if (latents.ndim() != 4) throw std::invalid_argument("decode_latents: latents are not (C, F, h, w)");
  const int64_t f = spec.spatial_factor();
  const Shape want = {spec.frames_of(latents.dim(1)), spec.out_channels(), latents.dim(2) * f, latents.dim(3) * f};
  if (out.shape() != want)
    throw std::invalid_argument("decode_latents: out is " + shape_str(out.shape()) + ", expected " + shape_str(want));
  if (!tiles) return decode_region(decoder, spec, latents, 0, latents.dim(2), 0, latents.dim(3), out);
  decode_tiled(decoder, spec, latents, out, *tiles);
}

}  // namespace ditgen::models
