// What PixArt's and Latte's transformer/config.json share: the sizes of an
// adaLN-single transformer (models/ada_single_block.h) beyond every DiT's
// (models/transformer_sizes.h), read and checked once here, and the latent
// size either makes for a requested image size. Each family's config
// (PixArtConfig, LatteConfig) derives from it and reads what is its own
// (PixArt's micro-conditions, Latte's video_length).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "models/transformer_sizes.h"

namespace ditgen::models {

struct AdaSingleConfig : TransformerSizes {
  int64_t caption_channels = 0;  // width of the text embeddings (the T5 hidden size)
  float norm_eps = 1e-6f;        // the blocks' LayerNorms (the final one uses 1e-6)
  // Position embedding: positions arange(g) / (g / grid()) / interpolation_scale.
  double interpolation_scale = 1;

  // The latent (h, w) for an image of height x width pixels (0 = the
  // native sample_size * vae_factor): both positive multiples of vae_factor
  // * patch_size, else ConfigError naming `where` ("run.json: generate").
  std::pair<int64_t, int64_t> latent_size(int64_t height, int64_t width, int64_t vae_factor,
                                          const std::string& where) const;
  // The 2-D sin-cos positions diffusers adds for a grid_h x grid_w token
  // grid (base_size grid(), interpolation_scale): (grid_h * grid_w, D), host.
  Tensor position_table(int64_t grid_h, int64_t grid_w) const;
};

// Reads the shared sizes from `cfg` (ModelError naming `path` and the key
// for anything missing, mistyped or out of range; cross_attention_dim must
// be the inner dimension, which the caption projection makes the text);
// `family` ("PixArt", "Latte") names the model in messages. norm_eps and
// interpolation_scale stay the caller's.
AdaSingleConfig read_ada_single_sizes(const nlohmann::json& cfg, const std::string& path, const char* family);

}  // namespace ditgen::models
