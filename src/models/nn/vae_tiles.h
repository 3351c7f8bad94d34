// The tile grid and the seam blending of a tiled VAE decode, as diffusers'
// enable_tiling / tiled_decode do them (AutoencoderKLWan, AutoencoderKL,
// AutoencoderKLCogVideoX: the same scheme under different defaults), as
// plain functions on float tiles, shared by every VAE (the decode loop is
// models/vae_decode.h).
//
// The scheme, per axis (height and width alike): tiles of `latent_size`
// latents start every `latent_stride` latents (0, stride, 2 stride, ... <
// the latent extent; the last ones are cut by the edge). Each decoded tile
// (its latents x the spatial factor f, in pixels) is blended, in raster
// order, with the tile above and then the tile to its left, both already
// blended themselves: over the first e = min(blend, both tiles' extents)
// rows (columns) y of the tile, tile[y] = prev[last e + y] * (1 - y/e) +
// tile[y] * (y/e). Of each tile the first `keep` pixels are kept, placed at
// its index x keep, and the image is cropped to h*f x w*f. diffusers'
// sizes: from tile_sample_min (m) and tile_sample_stride (s) in pixels,
// latent_size m/f, latent_stride s/f, blend m - s, keep s (tile_axis()).
// A tile is a (planes, rows, cols) block: planes = frames x channels.
// diffusers' tiled_encode (AutoencoderKLWan's) is the same scheme the other
// way: tiles of m pixels every s pixels, each encoded to latents, blended
// over m/f - s/f latents, s/f latents kept (encode_tile_axis()); the loop
// over tiles, the blending and the placing are one function for both
// directions (assemble_tiles()).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::models::nn {

// One axis of the grid (see above): latents for the first two, pixels
// for the last two.
struct TileAxis {
  int64_t latent_size = 0, latent_stride = 0;
  int64_t blend = 0, keep = 0;
  bool operator==(const TileAxis&) const = default;
};

struct TileGrid {
  TileAxis height, width;
  bool operator==(const TileGrid&) const = default;
};

// diffusers' enable_tiling arguments, in pixels (the config's vae section).
struct TileSampleSizes {
  int64_t min_height = 0, min_width = 0, stride_height = 0, stride_width = 0;
  bool operator==(const TileSampleSizes&) const = default;
};

// diffusers' tile_sample_min_* / tile_sample_stride_* (pixels), as its
// tiled_decode derives its sizes (spatial factor f): {m/f, s/f, m - s, s}.
// Callers have checked 1 <= s/f and s <= m.
TileAxis tile_axis(int64_t sample_min, int64_t sample_stride, int64_t factor);
// Both axes.
TileGrid tile_grid(const TileSampleSizes& sizes, int64_t factor);

// diffusers' tiled_encode from the same pixel sizes: tiles of m pixels
// every s pixels (latent_size m, latent_stride s: the input side, here in
// pixels), blended over m/f - s/f latents, s/f kept.
TileAxis encode_tile_axis(int64_t sample_min, int64_t sample_stride, int64_t factor);
TileGrid encode_tile_grid(const TileSampleSizes& sizes, int64_t factor);

// The tile starts along an axis of `latent_extent` latents: 0, stride, ...
// (< latent_extent).
std::vector<int64_t> tile_starts(const TileAxis& axis, int64_t latent_extent);

// Whether diffusers tiles a latent of h x w: either side over the tile.
bool needs_tiles(const TileGrid& grid, int64_t h, int64_t w);

// The last min(n, rows) rows / cols of every plane of `tile` (P, R, C):
// what the next tile below / to the right blends with.
Tensor last_rows(const Tensor& tile, int64_t n);
Tensor last_cols(const Tensor& tile, int64_t n);

// diffusers' blend_v: `tile` (P, R, C) blended in place with `above` (P,
// a, C), the last a rows of the tile above (a = min(its rows, blend)),
// over e = min(a, R, blend) rows.
void blend_rows(const Tensor& above, Tensor& tile, int64_t blend);
// diffusers' blend_h: the same over columns, `left` (P, R, a).
void blend_cols(const Tensor& left, Tensor& tile, int64_t blend);

// Of x (C, F, H, W), host float32: frames [f0, f0 + n) of rows [y0, y0 +
// th) and cols [x0, x0 + tw), as (C, n, th, tw).
Tensor region_of(const Tensor& x, int64_t f0, int64_t n, int64_t y0, int64_t th, int64_t x0, int64_t tw);

// One tile's output (P, R, C), host float32, from the input rows [y0, y0 +
// th) and cols [x0, x0 + tw).
using TileOf = std::function<Tensor(int64_t y0, int64_t th, int64_t x0, int64_t tw)>;

// The tiled loop of both directions over an input of in_h x in_w (the
// grid's input side): for each tile in raster order (starts tile_starts(),
// sizes cut by the edge) tile_of(...) gives its output, which is blended
// with the kept last rows of the tile above and the last columns of the
// tile to its left (blend_rows, blend_cols), and whose first keep x keep
// rows and columns go into `out` (P, H, W), host float32, at (i keep, j
// keep), cropped to H x W. Holds one tile and the blend rows of one row of
// tiles besides `out`.
void assemble_tiles(const TileGrid& grid, int64_t in_h, int64_t in_w, Tensor& out, const TileOf& tile_of);

}  // namespace ditgen::models::nn
