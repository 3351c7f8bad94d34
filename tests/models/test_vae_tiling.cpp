// Tiled VAE decode (models/vae_decode.h, models/nn/vae_tiles.h) against
// diffusers 0.42.1's tiled_decode (enable_tiling) of the tiny random VAEs
// of the other fixtures (tests/fixtures/vae_tiling, made by
// scripts/fixtures/make_vae_tiling_fixtures.py): Wan 2.1's, AutoencoderKL
// and CogVideoX's, each on a latent that makes several overlapping tiles
// (4 latents every 3, blended over 8 pixels, the last tiles cut by the
// edge). Also: one tile covering the latent gives the untiled decode bit
// for bit, and the grid and blend helpers against plain loops of
// diffusers' formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/nn/vae_tiles.h"
#include "models/registry.h"
#include "models/vae_decode.h"
#include "../ops/test_helpers.h"

using namespace ditgen;
using models::nn::TileAxis;

namespace {

struct LoadedVae {
  std::unique_ptr<models::VaeSpec> spec;
  std::unique_ptr<models::VaeDecoder> decoder;
};

LoadedVae load_vae(const std::string& dir) {
  const std::string path = dir + "/config.json";
  LoadedVae v;
  v.spec = models::vae_spec(io::read_json_file(path), path);
  v.decoder = v.spec->load(io::WeightStore::open_dir(dir), {Device::kCPU, DType::kF32});
  return v;
}

Tensor reference(const std::string& name) { return testing::fixture_tensor("vae_tiling", "tiled_decode.safetensors", name); }

// diffusers' (1, C, [F,] h, w) latents as the seam takes them: (C, F, h, w).
Tensor as_stream_latents(const Tensor& z) {
  if (z.ndim() == 4) return z.reshape({z.dim(1), 1, z.dim(2), z.dim(3)});
  return z.reshape({z.dim(1), z.dim(2), z.dim(3), z.dim(4)});
}

// ditgen's (F, C, H, W) frames as diffusers' (C, F, H, W) sample.
Tensor as_diffusers_sample(const Tensor& frames) {
  const int64_t f = frames.dim(0), c = frames.dim(1), hw = frames.dim(2) * frames.dim(3);
  Tensor out = Tensor::empty({c, f, frames.dim(2), frames.dim(3)});
  for (int64_t i = 0; i < f; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      std::copy_n(frames.data() + (i * c + ch) * hw, hw, out.data() + (ch * f + i) * hw);
  return out;
}

Tensor decode(const LoadedVae& v, const Tensor& z, const std::optional<models::nn::TileGrid>& tiles) {
  const int64_t f = v.spec->spatial_factor();
  Tensor out = Tensor::empty({v.spec->frames_of(z.dim(1)), v.spec->out_channels(), z.dim(2) * f, z.dim(3) * f});
  models::decode_latents(*v.decoder, *v.spec, z, out, tiles);
  return out;
}

// The fixture's tiles: 32 pixels every 24 (factor 8: 4 latents every 3, blend 8).
const models::nn::TileGrid kFixtureTiles = models::nn::tile_grid({32, 32, 24, 24}, 8);

void check_against_diffusers(const std::string& dir, const std::string& prefix, bool clamped) {
  const LoadedVae v = load_vae(dir);
  const Tensor z = as_stream_latents(reference(prefix + "_z"));
  Tensor got = as_diffusers_sample(decode(v, z, kFixtureTiles));
  if (clamped)
    for (int64_t i = 0; i < got.numel(); ++i) got[i] = std::clamp(got[i], -1.0f, 1.0f);
  const Tensor want = reference(prefix + "_sample");
  REQUIRE(got.numel() == want.numel());
  CAPTURE(prefix);
  MESSAGE(prefix << " tiled: relative L2 to diffusers' tiled decode " << testing::rel_l2(got, want) << ", max|d|/max|ref| "
                 << testing::max_rel(got, want));
  CHECK(testing::rel_l2(got, want) < 1e-5);
  CHECK(testing::max_rel(got, want) < 1e-4);
  // It did tile: the untiled decode is further from diffusers' tiled one.
  Tensor whole = as_diffusers_sample(decode(v, z, std::nullopt));
  if (clamped)
    for (int64_t i = 0; i < whole.numel(); ++i) whole[i] = std::clamp(whole[i], -1.0f, 1.0f);
  CHECK(testing::max_rel(whole, want) > 1e-3);
}

}  // namespace

TEST_CASE("vae tiles: the grid of diffusers' tiled_decode") {
  const TileAxis wan = models::nn::tile_axis(256, 192, 8);  // AutoencoderKLWan's defaults
  CHECK(wan == TileAxis{32, 24, 64, 192});
  CHECK(models::nn::tile_starts(wan, 60) == std::vector<int64_t>{0, 24, 48});
  CHECK(models::nn::tile_starts(wan, 24) == std::vector<int64_t>{0});
  CHECK(models::nn::tile_starts(wan, 25) == std::vector<int64_t>{0, 24});
  // diffusers tiles when either side is over the tile.
  const models::nn::TileGrid grid{wan, models::nn::tile_axis(128, 96, 8)};
  CHECK_FALSE(models::nn::needs_tiles(grid, 32, 16));
  CHECK(models::nn::needs_tiles(grid, 33, 16));
  CHECK(models::nn::needs_tiles(grid, 32, 17));
}

TEST_CASE("vae tiles: blend_rows and blend_cols are diffusers' blend_v and blend_h") {
  // Tiles of unequal extents, so e = min(a, b, blend) is each in turn.
  for (const auto& [a_rows, b_rows, blend] : std::vector<std::array<int64_t, 3>>{{5, 7, 4}, {3, 7, 4}, {6, 2, 4}, {4, 4, 0}}) {
    CAPTURE(a_rows);
    CAPTURE(b_rows);
    CAPTURE(blend);
    const int64_t planes = 2, cols = 3;
    const Tensor above_tile = testing::random_tensor({planes, a_rows, cols}, 1);
    const Tensor below = testing::random_tensor({planes, b_rows, cols}, 2);
    // Rows: diffusers' loop over the whole tile above.
    Tensor want = below.clone();
    const int64_t e = std::min({a_rows, b_rows, blend});
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t y = 0; y < e; ++y)
        for (int64_t x = 0; x < cols; ++x) {
          const double t = static_cast<double>(y) / static_cast<double>(e);
          want.data()[(p * b_rows + y) * cols + x] =
              above_tile.data()[(p * a_rows + a_rows - e + y) * cols + x] * static_cast<float>(1 - t) +
              below.data()[(p * b_rows + y) * cols + x] * static_cast<float>(t);
        }
    Tensor got = below.clone();
    models::nn::blend_rows(models::nn::last_rows(above_tile, blend), got, blend);
    CHECK(testing::max_rel(got, want) < 1e-6);

    // Columns: the same tiles transposed.
    auto transpose = [](const Tensor& t) {
      Tensor out = Tensor::empty({t.dim(0), t.dim(2), t.dim(1)});
      for (int64_t p = 0; p < t.dim(0); ++p)
        for (int64_t r = 0; r < t.dim(1); ++r)
          for (int64_t c = 0; c < t.dim(2); ++c)
            out.data()[(p * t.dim(2) + c) * t.dim(1) + r] = t.data()[(p * t.dim(1) + r) * t.dim(2) + c];
      return out;
    };
    Tensor got_cols = transpose(below);
    models::nn::blend_cols(models::nn::last_cols(transpose(above_tile), blend), got_cols, blend);
    CHECK(testing::max_rel(transpose(got_cols), want) < 1e-6);
  }
}

TEST_CASE("vae tiling: Wan 2.1's VAE tiled as diffusers' enable_tiling") {
  check_against_diffusers(testing::fixture_dir("wan_tiny") + "/vae", "wan", /*clamped=*/true);
}

TEST_CASE("vae tiling: AutoencoderKL tiled as diffusers' enable_tiling") {
  check_against_diffusers(testing::fixture_dir("pixart_tiny") + "/vae", "akl", /*clamped=*/false);
}

TEST_CASE("vae tiling: CogVideoX's VAE tiled as diffusers' enable_tiling") {
  check_against_diffusers(testing::fixture_dir("cogvideox_vae") + "/vae", "cog", /*clamped=*/false);
}

TEST_CASE("vae tiling: one tile covering the latent is the untiled decode") {
  const LoadedVae v = load_vae(testing::fixture_dir("wan_tiny") + "/vae");
  const Tensor z = as_stream_latents(reference("wan_z"));  // 7 x 6 latents
  const Tensor whole = decode(v, z, std::nullopt);
  // diffusers' own check: enable_tiling(56, 48, 56, 48) decodes untiled (the fixture script).
  const Tensor tiled = decode(v, z, models::nn::tile_grid({56, 48, 56, 48}, 8));
  REQUIRE(tiled.numel() == whole.numel());
  CHECK(std::equal(tiled.data(), tiled.data() + tiled.numel(), whole.data()));
}
