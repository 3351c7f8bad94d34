// See vae_tiling.h.
#include "pipeline/vae_tiling.h"

#include <cstdio>
#include <tuple>

#include "util/error.h"

namespace ditgen::pipeline {
namespace {

// "8.1 GiB", or "12.3 MiB" under a tenth of a GiB.
std::string gib(double bytes) {
  char text[32];
  const double gibs = bytes / (1024.0 * 1024.0 * 1024.0);
  if (gibs >= 0.1) std::snprintf(text, sizeof text, "%.1f GiB", gibs);
  else std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

models::nn::TileGrid vae_tile_grid(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where) {
  const models::nn::TileSampleSizes d = spec.default_tile_sizes();
  const models::nn::TileSampleSizes s = {
      vae.tile_sample_min_height > 0 ? vae.tile_sample_min_height : d.min_height,
      vae.tile_sample_min_width > 0 ? vae.tile_sample_min_width : d.min_width,
      vae.tile_sample_stride_height > 0 ? vae.tile_sample_stride_height : d.stride_height,
      vae.tile_sample_stride_width > 0 ? vae.tile_sample_stride_width : d.stride_width};
  const int64_t f = spec.spatial_factor();
  const std::string vae_name = std::string("this ") + spec.family() + " VAE";
  // A size given must be whole latents; a default is diffusers' (which may
  // not be: it still must reach one latent).
  for (const auto& [key, given, value] : {std::tuple{"tile_sample_min_height", vae.tile_sample_min_height, s.min_height},
                                          std::tuple{"tile_sample_min_width", vae.tile_sample_min_width, s.min_width},
                                          std::tuple{"tile_sample_stride_height", vae.tile_sample_stride_height,
                                                     s.stride_height},
                                          std::tuple{"tile_sample_stride_width", vae.tile_sample_stride_width,
                                                     s.stride_width}}) {
    if (given > 0 && given % f != 0)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(given) + " is not a multiple of " +
                        std::to_string(f) + " (the pixels per latent of " + vae_name + ")");
    if (value < f)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(value) + (given > 0 ? "" : " (the VAE's default)") +
                        " is under one latent, " + std::to_string(f) + " pixels of " + vae_name);
  }
  for (const auto& [key, stride, min] : {std::tuple{"tile_sample_stride_height", s.stride_height, s.min_height},
                                         std::tuple{"tile_sample_stride_width", s.stride_width, s.min_width}})
    if (stride > min)
      throw ConfigError(where + ": vae." + key + ": " + std::to_string(stride) + " is over the tile's side " +
                        std::to_string(min) + " (tiles would leave gaps)");
  return models::nn::tile_grid(s, f);
}

VaeTilingDecision decide_vae_tiling(const VaeTilingSettings& settings, const models::VaeSpec& spec, int64_t h,
                                    int64_t w) {
  VaeTilingDecision d;
  if (settings.vae.tiling == VaeTiling::kOff) return d;
  const models::nn::TileGrid grid = vae_tile_grid(settings.vae, spec, settings.where);
  if (!models::nn::needs_tiles(grid, h, w)) return d;  // one tile covers it
  if (settings.vae.tiling == VaeTiling::kAuto) {
    const double untiled = spec.decode_bytes(h, w);
    if (untiled <= settings.memory_limit_bytes) return d;
    const int64_t f = spec.spatial_factor();
    d.note = "vae: tiled decode (vae.tiling auto): the untiled decode of " + std::to_string(w * f) + "x" +
             std::to_string(h * f) + " would need about " + gib(untiled) + ", over the memory limit of " +
             gib(settings.memory_limit_bytes) + "; tiles of " + std::to_string(grid.width.latent_size * f) + "x" +
             std::to_string(grid.height.latent_size * f) + " need about " +
             gib(spec.decode_bytes(grid.height.latent_size, grid.width.latent_size));
  }
  d.grid = grid;
  return d;
}

}  // namespace ditgen::pipeline
