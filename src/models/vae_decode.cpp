// See vae_decode.h.
#include "models/vae_decode.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tensor/device_memory.h"

namespace ditgen::models {
namespace {

// (C, F', h, w) -> the latent frames [f0, f0 + n) of rows [y0, y0 + th), cols [x0, x0 + tw).
Tensor latent_block(const Tensor& z, int64_t f0, int64_t n, int64_t y0, int64_t th, int64_t x0, int64_t tw) {
  const int64_t channels = z.dim(0), frames = z.dim(1), h = z.dim(2), w = z.dim(3);
  Tensor block = Tensor::empty({channels, n, th, tw});
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t f = 0; f < n; ++f)
      for (int64_t y = 0; y < th; ++y)
        std::memcpy(block.data() + ((c * n + f) * th + y) * tw, z.data() + ((c * frames + f0 + f) * h + y0 + y) * w + x0,
                    static_cast<size_t>(tw) * sizeof(float));
  return block;
}

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
    const Tensor img = stream->next(latent_block(z, f0, chunk, y0, th, x0, tw));
    if (img.numel() % per_frame != 0 || frame + img.numel() / per_frame > frames)
      throw std::logic_error("decode_latents: the VAE decoded other frames than frames_of() and its factor say");
    std::memcpy(dest.data() + frame * per_frame, img.data(), static_cast<size_t>(img.numel()) * sizeof(float));
    frame += img.numel() / per_frame;
    f0 += chunk;
  }
  if (frame != frames) throw std::logic_error("decode_latents: the VAE decoded fewer frames than frames_of() says");
}

// Rows [y0, y0 + rows) x cols [x0, x0 + cols) of `tile` (P, R, C) into
// `out` (P, H, W) at (oy, ox).
void put_block(const Tensor& tile, int64_t rows, int64_t cols, Tensor& out, int64_t oy, int64_t ox) {
  const int64_t planes = tile.dim(0), tr = tile.dim(1), tc = tile.dim(2), oh = out.dim(1), ow = out.dim(2);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < rows; ++y)
      std::memcpy(out.data() + (p * oh + oy + y) * ow + ox, tile.data() + (p * tr + y) * tc,
                  static_cast<size_t>(cols) * sizeof(float));
}

void decode_tiled(const VaeDecoder& decoder, const VaeSpec& spec, const Tensor& z, Tensor& out,
                  const nn::TileGrid& grid) {
  const int64_t h = z.dim(2), w = z.dim(3), f = spec.spatial_factor();
  const int64_t height = h * f, width = w * f, planes = out.dim(0) * out.dim(1);
  Tensor image = out.reshape({planes, height, width});
  const std::vector<int64_t> ys = nn::tile_starts(grid.height, h), xs = nn::tile_starts(grid.width, w);
  std::vector<Tensor> bottoms(xs.size());  // per column of tiles: the last blend rows of the tile above
  for (size_t i = 0; i < ys.size(); ++i) {
    Tensor right;  // the last blend columns of the tile to the left
    const int64_t th = std::min(grid.height.latent_size, h - ys[i]);
    for (size_t j = 0; j < xs.size(); ++j) {
      const int64_t tw = std::min(grid.width.latent_size, w - xs[j]);
      Tensor tile = Tensor::empty({planes, th * f, tw * f});
      decode_region(decoder, spec, z, ys[i], th, xs[j], tw, tile);
      // The edge tiles are smaller: blocks cached for one tile's sizes
      // would pile up beside the next's.
      device_memory::release_cached_host();
      if (i > 0) nn::blend_rows(bottoms[j], tile, grid.height.blend);
      if (j > 0) nn::blend_cols(right, tile, grid.width.blend);
      const int64_t oy = static_cast<int64_t>(i) * grid.height.keep, ox = static_cast<int64_t>(j) * grid.width.keep;
      if (oy < height && ox < width)
        put_block(tile, std::min({grid.height.keep, th * f, height - oy}), std::min({grid.width.keep, tw * f, width - ox}),
                  image, oy, ox);
      bottoms[j] = nn::last_rows(tile, grid.height.blend);
      right = nn::last_cols(tile, grid.width.blend);
    }
  }
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
  if (tiles->height.latent_stride < 1 || tiles->width.latent_stride < 1 || tiles->height.keep < 1 ||
      tiles->width.keep < 1)
    throw std::invalid_argument("decode_latents: a tile grid with a stride under one latent");
  decode_tiled(decoder, spec, latents, out, *tiles);
}

}  // namespace ditgen::models
