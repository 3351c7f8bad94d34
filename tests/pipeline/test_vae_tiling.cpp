// vae.tiling decided (pipeline/vae_tiling.h) for the fixtures' VAEs: the
// grid from the config's sizes or the VAE's diffusers defaults, sizes the
// VAE cannot take refused naming the field (exit 2), and "on" / "off" /
// "auto" against the memory limit, auto's note saying why it tiles.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "io/model_dir.h"
#include "models/registry.h"
#include "pipeline/vae_tiling.h"
#include "util/error.h"

using namespace ditgen;

namespace {

std::unique_ptr<models::VaeSpec> fixture_vae(const std::string& fixture) {
  const std::string path = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/" + fixture + "/config.json";
  return models::vae_spec(io::read_json_file(path), path);
}

std::string grid_error(const VaeConfig& vae, const models::VaeSpec& spec) {
  try {
    pipeline::vae_tile_grid(vae, spec, "run.json");
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL_CHECK("expected a ConfigError");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("vae tiling: the grid is diffusers' defaults for each VAE, or the config's sizes") {
  using models::nn::TileAxis;
  const auto wan = fixture_vae("wan_tiny/vae");
  // AutoencoderKLWan: 256 every 192.
  CHECK(pipeline::vae_tile_grid({}, *wan, "run.json") ==
        models::nn::TileGrid{TileAxis{32, 24, 64, 192}, TileAxis{32, 24, 64, 192}});
  VaeConfig sized;
  sized.tile_sample_min_width = 128;
  sized.tile_sample_stride_width = 96;
  CHECK(pipeline::vae_tile_grid(sized, *wan, "run.json").width == TileAxis{16, 12, 32, 96});
  // AutoencoderKL: sample_size (pixart_tiny: 80) overlapping by a quarter: 80 every 60.
  const auto akl = fixture_vae("pixart_tiny/vae");
  CHECK(akl->default_tile_sizes() == models::nn::TileSampleSizes{80, 80, 60, 60});
  // CogVideoX: half sample_height / width (32 / 32), overlapping by 1/6 and 1/5.
  const auto cog = fixture_vae("cogvideox_tiny/vae");
  CHECK(cog->default_tile_sizes() == models::nn::TileSampleSizes{16, 16, 14, 13});
  // Not whole latents, as diffusers' own: taken (its tiled_decode's int()s are tile_axis' divisions).
  CHECK(pipeline::vae_tile_grid({}, *cog, "run.json") ==
        models::nn::TileGrid{TileAxis{2, 1, 2, 14}, TileAxis{2, 1, 3, 13}});
}

TEST_CASE("vae tiling: sizes the VAE cannot take are errors naming the field") {
  const auto wan = fixture_vae("wan_tiny/vae");
  VaeConfig odd;
  odd.tile_sample_min_height = 100;
  CHECK(contains(grid_error(odd, *wan), "run.json: vae.tile_sample_min_height: 100 is not a multiple of 8"));
  VaeConfig wide;  // a stride over the VAE's default side (256)
  wide.tile_sample_stride_width = 320;
  CHECK(contains(grid_error(wide, *wan), "run.json: vae.tile_sample_stride_width: 320 is over the tile's side 256"));
}

TEST_CASE("vae tiling: on, off and auto against the memory limit") {
  const auto wan = fixture_vae("wan_tiny/vae");
  pipeline::VaeTilingSettings s;
  s.where = "run.json";
  s.vae.tile_sample_min_height = s.vae.tile_sample_min_width = 32;
  s.vae.tile_sample_stride_height = s.vae.tile_sample_stride_width = 24;
  const models::nn::TileGrid grid = pipeline::vae_tile_grid(s.vae, *wan, s.where);

  s.vae.tiling = VaeTiling::kOff;
  CHECK_FALSE(pipeline::decide_vae_tiling(s, *wan, 60, 104).grid);

  s.vae.tiling = VaeTiling::kOn;
  CHECK(pipeline::decide_vae_tiling(s, *wan, 60, 104).grid == grid);
  CHECK(pipeline::decide_vae_tiling(s, *wan, 60, 104).note.empty());
  CHECK_FALSE(pipeline::decide_vae_tiling(s, *wan, 4, 4).grid);  // one tile covers it: untiled, as diffusers

  s.vae.tiling = VaeTiling::kAuto;
  s.memory_limit_bytes = wan->decode_bytes(60, 104);  // exactly enough: untiled
  CHECK_FALSE(pipeline::decide_vae_tiling(s, *wan, 60, 104).grid);
  s.memory_limit_bytes = wan->decode_bytes(60, 104) * 0.99;
  const pipeline::VaeTilingDecision d = pipeline::decide_vae_tiling(s, *wan, 60, 104);
  CHECK(d.grid == grid);
  CHECK(contains(d.note, "vae: tiled decode (vae.tiling auto): the untiled decode of 832x480 would need about"));
  CHECK(contains(d.note, "tiles of 32x32"));
  // The estimate grows with the area, so a tile needs less than the whole.
  CHECK(wan->decode_bytes(4, 4) * 100 < wan->decode_bytes(60, 104));
}

TEST_CASE("vae tiling: errors say a value that works, and the defaults are checked only where tiles may be used") {
  const auto wan = fixture_vae("wan_tiny/vae");
  VaeConfig odd;
  odd.tile_sample_min_width = 100;
  CHECK(contains(grid_error(odd, *wan), "vae.tile_sample_min_width: 100 is not a multiple of 8 (the pixels per "
                                        "latent of this autoencoder_kl_wan VAE); 96 or 104 would do"));
  VaeConfig wide;
  wide.tile_sample_stride_width = 320;  // over the default side 256
  CHECK(contains(grid_error(wide, *wan), "320 is over the tile's side 256 (tiles would leave gaps); at most 256 works"));
  // Under "off" no tile is made: the stride against the VAE's default side
  // is not looked at, a size no VAE could take still is.
  pipeline::VaeTilingSettings s;
  s.where = "run.json";
  s.vae = wide;
  s.vae.tiling = VaeTiling::kOff;
  CHECK_NOTHROW(pipeline::check_given_tile_sizes(s.vae, *wan, s.where));
  const pipeline::VaeTilingDecision off = pipeline::decide_vae_tiling(s, *wan, 60, 104);
  CHECK_FALSE(off.grid);
  CHECK(off.why == "vae.tiling off");
  s.vae.tile_sample_min_height = 30;
  CHECK_THROWS_AS(pipeline::check_given_tile_sizes(s.vae, *wan, s.where), ConfigError);
  VaeConfig both;  // a given stride over a given side
  both.tile_sample_min_height = 64;
  both.tile_sample_stride_height = 72;
  CHECK_THROWS_WITH_AS(pipeline::check_given_tile_sizes(both, *wan, "run.json"),
                       doctest::Contains("vae.tile_sample_stride_height: 72 is over the tile's side 64"), ConfigError);
}

TEST_CASE("vae tiling: auto weighs the untiled decode against the limit less what the rank holds besides") {
  const auto wan = fixture_vae("wan_tiny/vae");
  pipeline::VaeTilingSettings s;
  s.where = "run.json";
  const double untiled = wan->decode_bytes(60, 104);
  s.memory_limit_bytes = untiled * 1.5;
  s.held_bytes = untiled * 0.4;  // room 1.1x the decode: untiled
  const pipeline::VaeTilingDecision fits = pipeline::decide_vae_tiling(s, *wan, 60, 104);
  CHECK_FALSE(fits.grid);
  CHECK(contains(fits.why, "vae.tiling auto: the untiled decode of 832x480 needs about"));
  CHECK(contains(fits.why, "the memory limit leaves it ("));
  CHECK(contains(fits.record_json(VaeTiling::kAuto), R"("tiled":false,"tiling":"auto")"));
  s.held_bytes = untiled * 0.6;  // room 0.9x the decode: tiled
  const pipeline::VaeTilingDecision tiled = pipeline::decide_vae_tiling(s, *wan, 60, 104);
  REQUIRE(tiled.grid);
  CHECK(contains(tiled.note, "vae: tiled decode (vae.tiling auto): the untiled decode of 832x480 would need about"));
  CHECK(contains(tiled.why, "vae.tiling auto: the untiled decode"));
  // The record in pixels: Wan's default tiles of 256 every 192.
  CHECK(contains(tiled.record_json(VaeTiling::kAuto), R"("stride":[192,192],"tile":[256,256],"tiled":true)"));
}
