// See vae_tiles.h. The weights y / e are computed in double and rounded to
// float, as torch multiplies a float32 tensor by a Python float.
#include "models/nn/vae_tiles.h"

#include <algorithm>
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

}  // namespace ditgen::models::nn
