// See vae_tiling.h.
#include "pipeline/vae_tiling.h"

#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/strings.h"

namespace ditgen::pipeline {
namespace {

// A stride over its tile's side leaves gaps; either may be absent (0:
// not looked at here).
void check_strides(int64_t stride_h, int64_t side_h, int64_t stride_w, int64_t side_w, const std::string& where) {
  for (const auto& [key, stride, side] : {std::tuple{"tile_sample_stride_height", stride_h, side_h},
                                          std::tuple{"tile_sample_stride_width", stride_w, side_w}})
    if (stride > 0 && side > 0 && stride > side)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(stride) + " is over the tile's side " +
                        std::to_string(side) + " (tiles would leave gaps); at most " + std::to_string(side) +
                        " works");
}

}  // namespace

void check_given_tile_sizes(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where) {
  const int64_t f = spec.spatial_factor();
  const std::string vae_name = std::string("this ") + spec.family() + " VAE";
  for (const auto& [key, given] : {std::pair{"tile_sample_min_height", vae.tile_sample_min_height},
                                   std::pair{"tile_sample_min_width", vae.tile_sample_min_width},
                                   std::pair{"tile_sample_stride_height", vae.tile_sample_stride_height},
                                   std::pair{"tile_sample_stride_width", vae.tile_sample_stride_width}})
    if (given > 0 && given % f != 0)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(given) + " is not a multiple of " +
                        std::to_string(f) + " (the pixels per latent of " + vae_name + "); " +
                        (given < f ? "" : std::to_string(given / f * f) + " or ") +
                        std::to_string((given / f + 1) * f) + " would do");
  check_strides(vae.tile_sample_stride_height, vae.tile_sample_min_height, vae.tile_sample_stride_width,
                vae.tile_sample_min_width, where);
}

models::nn::TileGrid vae_tile_grid(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where) {
  check_given_tile_sizes(vae, spec, where);
  const models::nn::TileSampleSizes d = spec.default_tile_sizes();
  const models::nn::TileSampleSizes s = {
      vae.tile_sample_min_height > 0 ? vae.tile_sample_min_height : d.min_height,
      vae.tile_sample_min_width > 0 ? vae.tile_sample_min_width : d.min_width,
      vae.tile_sample_stride_height > 0 ? vae.tile_sample_stride_height : d.stride_height,
      vae.tile_sample_stride_width > 0 ? vae.tile_sample_stride_width : d.stride_width};
  const int64_t f = spec.spatial_factor();
  const std::string vae_name = std::string("this ") + spec.family() + " VAE";
  // A default is diffusers' (which may not be whole latents): it still must
  // reach one latent.
  for (const auto& [key, given, value] : {std::tuple{"tile_sample_min_height", vae.tile_sample_min_height, s.min_height},
                                          std::tuple{"tile_sample_min_width", vae.tile_sample_min_width, s.min_width},
                                          std::tuple{"tile_sample_stride_height", vae.tile_sample_stride_height,
                                                     s.stride_height},
                                          std::tuple{"tile_sample_stride_width", vae.tile_sample_stride_width,
                                                     s.stride_width}})
    if (value < f)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(value) + (given > 0 ? "" : " (the VAE's default)") +
                        " is under one latent, " + std::to_string(f) + " pixels of " + vae_name + "; the smallest "
                        "that works is " + std::to_string(f));
  check_strides(s.stride_height, s.min_height, s.stride_width, s.min_width, where);
  return models::nn::tile_grid(s, f);
}

std::string VaeTilingDecision::record_json(VaeTiling mode) const {
  nlohmann::json j = {{"tiling", name_of(mode)},
                      {"tiled", grid.has_value()}};
  if (grid) {
    j["tile"] = {grid->height.latent_size * spatial_factor, grid->width.latent_size * spatial_factor};
    j["stride"] = {grid->height.latent_stride * spatial_factor, grid->width.latent_stride * spatial_factor};
  }
  j["why"] = why;
  return j.dump();
}

VaeTilingDecision decide_vae_tiling(const VaeTilingSettings& settings, const models::VaeSpec& spec, int64_t h,
                                    int64_t w) {
  VaeTilingDecision d;
  const int64_t f = spec.spatial_factor();
  d.spatial_factor = f;
  const std::string size = std::to_string(w * f) + "x" + std::to_string(h * f);
  if (settings.vae.tiling == VaeTiling::kOff) {
    d.why = "vae.tiling off";
    return d;
  }
  const models::nn::TileGrid grid = vae_tile_grid(settings.vae, spec, settings.where);
  if (!models::nn::needs_tiles(grid, h, w)) {  // one tile covers it
    d.why = "one tile covers " + size;
    return d;
  }
  if (settings.vae.tiling == VaeTiling::kAuto) {
    const double untiled = spec.decode_bytes(h, w), room = settings.memory_limit_bytes - settings.held_bytes;
    // "the memory limit of 8.0 GiB", or "the 6.1 GiB the memory limit leaves it (8.0 GiB less 1.9 GiB the run
    // holds besides)".
    const std::string limit =
        settings.held_bytes > 0 ? "the " + format_bytes(room) + " the memory limit leaves it (" +
                                      format_bytes(settings.memory_limit_bytes) + " less " + format_bytes(settings.held_bytes) +
                                      " the run holds besides)"
                                : "the memory limit of " + format_bytes(room);
    if (untiled <= room) {
      d.why = "vae.tiling auto: the untiled decode of " + size + " needs about " + format_bytes(untiled) + ", within " + limit;
      return d;
    }
    const std::string reason =
        "the untiled decode of " + size + " would need about " + format_bytes(untiled) + ", over " + limit + "; tiles of " + std::to_string(grid.width.latent_size * f) + "x" +
        std::to_string(grid.height.latent_size * f) + " need about " +
        format_bytes(spec.decode_bytes(grid.height.latent_size, grid.width.latent_size));
    d.note = "vae: tiled decode (vae.tiling auto): " + reason;
    d.why = "vae.tiling auto: " + reason;
  } else {
    d.why = "vae.tiling on";
  }
  d.grid = grid;
  return d;
}

}  // namespace ditgen::pipeline
