// vae.tiling decided (docs/vae-tiling.md): the config's vae section and the
// memory limit against one VAE and one latent size -> whether the decode
// runs in spatial tiles (models/vae_decode.h) and on which grid.
//
// The sizes are the config's, each absent one the VAE's own diffusers
// default (VaeSpec::default_tile_sizes), checked against the VAE: multiples
// of its spatial factor (so a tile's pixels are its latents' exactly), a
// stride no more than its side. "on" tiles whenever the latent is larger
// than a tile on either side (as diffusers' use_tiling); "off" never;
// "auto" (default) when, besides, the VAE's estimate of the untiled decode
// (VaeSpec::decode_bytes) is over the memory limit, and then says so in a
// note (one line for stderr).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "models/nn/vae_tiles.h"
#include "models/vae_spec.h"

namespace ditgen::pipeline {

// What a run asks of its decode: the vae section, the memory limit in
// bytes (--memory-limit, else the available memory) and the config file
// (for messages).
struct VaeTilingSettings {
  VaeConfig vae;
  double memory_limit_bytes = 0;
  std::string where;
};

// The grid the settings give this VAE. ConfigError naming `where` and the
// vae field at fault.
models::nn::TileGrid vae_tile_grid(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where);

struct VaeTilingDecision {
  std::optional<models::nn::TileGrid> grid;  // empty: untiled
  std::string note;  // "auto" tiling: why, for stderr; otherwise ""
};

// The decision for h x w latents.
VaeTilingDecision decide_vae_tiling(const VaeTilingSettings& settings, const models::VaeSpec& spec, int64_t h,
                                    int64_t w);

}  // namespace ditgen::pipeline
