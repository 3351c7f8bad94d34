// See vae_tiles.h. The weights y / e are computed in double and rounded to
// float, as torch multiplies a float32 tensor by a Python float.
#include "models/nn/vae_tiles.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ditgen::models::nn {
namespace {

// The weights of the previous tile and of this one at offset y of e.
struct BlendWeights {
  float prev, self;
  BlendWeights(int64_t y, int64_t e)
      : prev(static_cast<float>(1.0 - static_cast<double>(y) / static_cast<double>(e))),
        self(static_cast<float>(static_cast<double>(y) / static_cast<double>(e))) {}
};

void check_tile(const Tensor& t, const char* what) {
  if (t.ndim() != 3) throw std::invalid_argument(std::string("vae tiles: ") + what + " is not (planes, rows, cols)");
}

// `prev` and `tile` as blending takes them: (planes, rows, cols) each, the
// same planes and the same extent along `shared` (1: rows, 2: cols).
void check_neighbour(const Tensor& prev, const Tensor& tile, int shared, const char* what) {
  check_tile(prev, what);
  check_tile(tile, "tile");
  if (prev.dim(0) != tile.dim(0) || prev.dim(shared) != tile.dim(shared))
    throw std::invalid_argument(std::string("vae tiles: ") + what + " does not line up with the tile");
}

}  // namespace

TileAxis tile_axis(int64_t sample_min, int64_t sample_stride, int64_t factor) {
  return {sample_min / factor, sample_stride / factor, sample_min - sample_stride, sample_stride};
}

TileGrid tile_grid(const TileSampleSizes& sizes, int64_t factor) {
  return {tile_axis(sizes.min_height, sizes.stride_height, factor), tile_axis(sizes.min_width, sizes.stride_width, factor)};
}

TileAxis encode_tile_axis(int64_t sample_min, int64_t sample_stride, int64_t factor) {
  return {sample_min, sample_stride, sample_min / factor - sample_stride / factor, sample_stride / factor};
}

TileGrid encode_tile_grid(const TileSampleSizes& sizes, int64_t factor) {
  return {encode_tile_axis(sizes.min_height, sizes.stride_height, factor),
          encode_tile_axis(sizes.min_width, sizes.stride_width, factor)};
}

std::vector<int64_t> tile_starts(const TileAxis& axis, int64_t latent_extent) {
  if (axis.latent_stride < 1) throw std::invalid_argument("vae tiles: latent stride < 1");
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < latent_extent; i += axis.latent_stride) starts.push_back(i);
  return starts;
}

bool needs_tiles(const TileGrid& grid, int64_t h, int64_t w) {
  return h > grid.height.latent_size || w > grid.width.latent_size;
}

Tensor last_rows(const Tensor& tile, int64_t n) {
  check_tile(tile, "tile");
  const int64_t planes = tile.dim(0), rows = tile.dim(1), cols = tile.dim(2), k = std::min(n, rows);
  Tensor out = Tensor::empty({planes, k, cols});
  for (int64_t p = 0; p < planes; ++p)
    std::copy_n(tile.data() + (p * rows + rows - k) * cols, k * cols, out.data() + p * k * cols);
  return out;
}

Tensor last_cols(const Tensor& tile, int64_t n) {
  check_tile(tile, "tile");
  const int64_t planes = tile.dim(0), rows = tile.dim(1), cols = tile.dim(2), k = std::min(n, cols);
  Tensor out = Tensor::empty({planes, rows, k});
  for (int64_t r = 0; r < planes * rows; ++r)
    std::copy_n(tile.data() + r * cols + cols - k, k, out.data() + r * k);
  return out;
}

void blend_rows(const Tensor& above, Tensor& tile, int64_t blend) {
  check_neighbour(above, tile, 2, "the tile above");
  const int64_t planes = tile.dim(0), rows = tile.dim(1), cols = tile.dim(2), a = above.dim(1);
  const int64_t e = std::min({a, rows, blend});
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < e; ++y) {
      const BlendWeights wgt(y, e);
      const float* prev = above.data() + (p * a + a - e + y) * cols;
      float* self = tile.data() + (p * rows + y) * cols;
      for (int64_t x = 0; x < cols; ++x) self[x] = prev[x] * wgt.prev + self[x] * wgt.self;
    }
}

void blend_cols(const Tensor& left, Tensor& tile, int64_t blend) {
  check_neighbour(left, tile, 1, "the tile to the left");
  const int64_t planes = tile.dim(0), rows = tile.dim(1), cols = tile.dim(2), a = left.dim(2);
  const int64_t e = std::min({a, cols, blend});
  for (int64_t x = 0; x < e; ++x) {
    const BlendWeights wgt(x, e);
    for (int64_t r = 0; r < planes * rows; ++r) {
      float& self = tile.data()[r * cols + x];
      self = left.data()[r * a + a - e + x] * wgt.prev + self * wgt.self;
    }
  }
}

Tensor region_of(const Tensor& x, int64_t f0, int64_t n, int64_t y0, int64_t th, int64_t x0, int64_t tw) {
  if (x.ndim() != 4) throw std::invalid_argument("vae tiles: a region of " + shape_str(x.shape()) + ", not (C, F, H, W)");
  const int64_t channels = x.dim(0), frames = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (f0 < 0 || n < 0 || f0 + n > frames || y0 < 0 || th < 0 || y0 + th > h || x0 < 0 || tw < 0 || x0 + tw > w)
    throw std::invalid_argument("vae tiles: a region outside " + shape_str(x.shape()));
  Tensor block = Tensor::empty({channels, n, th, tw});
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t f = 0; f < n; ++f)
      for (int64_t y = 0; y < th; ++y)
        std::memcpy(block.data() + ((c * n + f) * th + y) * tw, x.data() + ((c * frames + f0 + f) * h + y0 + y) * w + x0,
                    static_cast<size_t>(tw) * sizeof(float));
  return block;
}

namespace {

// Rows [0, rows) x cols [0, cols) of `tile` (P, R, C) into `out` (P, H, W) at (oy, ox).
void put_block(const Tensor& tile, int64_t rows, int64_t cols, Tensor& out, int64_t oy, int64_t ox) {
  const int64_t planes = tile.dim(0), tr = tile.dim(1), tc = tile.dim(2), oh = out.dim(1), ow = out.dim(2);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < rows; ++y)
      std::memcpy(out.data() + (p * oh + oy + y) * ow + ox, tile.data() + (p * tr + y) * tc,
                  static_cast<size_t>(cols) * sizeof(float));
}

}  // namespace

void assemble_tiles(const TileGrid& grid, int64_t in_h, int64_t in_w, Tensor& out, const TileOf& tile_of) {
  check_tile(out, "the output");
  if (grid.height.latent_stride < 1 || grid.width.latent_stride < 1 || grid.height.keep < 1 || grid.width.keep < 1)
    throw std::invalid_argument("vae tiles: a tile grid with a stride under one latent");
  const int64_t planes = out.dim(0), height = out.dim(1), width = out.dim(2);
  const std::vector<int64_t> ys = tile_starts(grid.height, in_h), xs = tile_starts(grid.width, in_w);
  std::vector<Tensor> bottoms(xs.size());  // per column of tiles: the last blend rows of the tile above
  for (size_t i = 0; i < ys.size(); ++i) {
    Tensor right;  // the last blend columns of the tile to the left
    const int64_t th = std::min(grid.height.latent_size, in_h - ys[i]);
    for (size_t j = 0; j < xs.size(); ++j) {
      const int64_t tw = std::min(grid.width.latent_size, in_w - xs[j]);
      Tensor tile = tile_of(ys[i], th, xs[j], tw);
      if (tile.ndim() != 3 || tile.dim(0) != planes)
        throw std::logic_error("vae tiles: a tile of " + shape_str(tile.shape()) + " for an output of " +
                               shape_str(out.shape()));
      if (i > 0) blend_rows(bottoms[j], tile, grid.height.blend);
      if (j > 0) blend_cols(right, tile, grid.width.blend);
      const int64_t oy = static_cast<int64_t>(i) * grid.height.keep, ox = static_cast<int64_t>(j) * grid.width.keep;
      if (oy < height && ox < width)
        put_block(tile, std::min({grid.height.keep, tile.dim(1), height - oy}),
                  std::min({grid.width.keep, tile.dim(2), width - ox}), out, oy, ox);
      bottoms[j] = last_rows(tile, grid.height.blend);
      right = last_cols(tile, grid.width.blend);
    }
  }
}

}  // namespace ditgen::models::nn
