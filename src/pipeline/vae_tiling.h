// vae.tiling decided (docs/vae-tiling.md): the config's vae section and the
// memory limit against one VAE and one latent size -> whether the decode
// runs in spatial tiles (models/vae_decode.h) and on which grid.
//
// The sizes are the config's, each absent one the VAE's own diffusers
// default (VaeSpec::default_tile_sizes), checked against the VAE: multiples
// of its spatial factor (so a tile's pixels are its latents' exactly), a
// stride no more than its side; the defaults only where tiles may be used
// (not under "off"). "on" tiles whenever the latent is larger than a tile
// on either side (as diffusers' use_tiling); "off" never; "auto" (default)
// when, besides, the VAE's estimate of the untiled decode
// (VaeSpec::decode_bytes) is over what the memory limit leaves the decode
// (the limit less what the rank holds besides: pipeline/run_memory.h), and
// then says so in a note (one line for stderr). The decision, with why,
// goes into the run's record (record()).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "models/nn/vae_tiles.h"
#include "models/vae_spec.h"

namespace ditgen::pipeline {

// What a run asks of its decode: the vae section, the memory limit in
// bytes (--memory-limit, else the available memory), what the decoding
// rank holds besides the decode's own working memory (weights, the process,
// the decoded frames), and the config file (for messages).
struct VaeTilingSettings {
  VaeConfig vae;
  double memory_limit_bytes = 0;
  double held_bytes = 0;
  std::string where;
};

// ConfigError naming `where` and the field for a tile size the config
// gives that the VAE cannot take (not whole latents; a stride over its
// side), with a value that works. The defaults are not looked at.
void check_given_tile_sizes(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where);

// The grid the settings give this VAE. ConfigError naming `where` and the
// vae field at fault.
models::nn::TileGrid vae_tile_grid(const VaeConfig& vae, const models::VaeSpec& spec, const std::string& where);

struct VaeTilingDecision {
  std::optional<models::nn::TileGrid> grid;  // empty: untiled
  std::string note;  // "auto" tiling: why, for stderr; otherwise ""
  std::string why;   // why tiled or not, always: "vae.tiling off", "one tile covers 104x60", ...
  int64_t spatial_factor = 8;
  // {"tiling": "auto", "tiled": true, "tile": [H, W], "stride": [H, W], "why": ...}
  // (pixels): the run record's "vae" entry.
  std::string record_json(VaeTiling mode) const;
};

// The decision for h x w latents.
VaeTilingDecision decide_vae_tiling(const VaeTilingSettings& settings, const models::VaeSpec& spec, int64_t h,
                                    int64_t w);

}  // namespace ditgen::pipeline
