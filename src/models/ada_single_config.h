// What PixArt's and Latte's transformer/config.json share: the sizes of an
// adaLN-single transformer (models/ada_single_block.h), read and checked
// once here, the block options both families support only in one form, and
// the latent size either makes for a requested image size. Each family's
// config (PixArtConfig, LatteConfig) derives from it and reads what is its
// own (PixArt's micro-conditions, Latte's video_length).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace ditgen::models {

struct AdaSingleConfig {
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;      // 2 * in_channels when sigma is learned
  int64_t caption_channels = 0;  // width of the text embeddings (the T5 hidden size)
  int64_t sample_size = 0;       // native latent height = width
  int64_t patch_size = 0;
  int64_t ff_inner_dim = 0;      // 4 * inner_dim
  float norm_eps = 1e-6f;        // the blocks' LayerNorms (the final one uses 1e-6)
  // Position embedding: positions arange(g) / (g / base_grid()) / interpolation_scale.
  double interpolation_scale = 1;

  int64_t inner_dim() const { return num_heads * head_dim; }
  int64_t base_grid() const { return sample_size / patch_size; }  // PatchEmbed's base_size

  // The latent (h, w) for an image of height x width pixels (0 = the
  // native sample_size * vae_factor): both positive multiples of vae_factor
  // * patch_size, else ConfigError naming `where` ("run.json: generate").
  std::pair<int64_t, int64_t> latent_size(int64_t height, int64_t width, int64_t vae_factor,
                                          const std::string& where) const;
};

// The block options of a config.json, as diffusers defaults them for the
// family's class when a key is missing.
struct AdaSingleOptionDefaults {
  const char* activation_fn;
  bool norm_elementwise_affine;
  bool attention_bias;
};

// Reads the shared sizes from `cfg` (ModelError naming `path` and the key
// for anything missing, mistyped or out of range; cross_attention_dim must
// be the inner dimension, which the caption projection makes the text);
// `family` ("PixArt", "Latte") names the model in messages. norm_eps and
// interpolation_scale stay the caller's.
AdaSingleConfig read_ada_single_sizes(const nlohmann::json& cfg, const std::string& path, const char* family);

// ModelError "not supported yet" unless the block is the one both families
// publish: gelu-approximate, LayerNorms without affine, attention biases.
void check_ada_single_options(const nlohmann::json& cfg, const std::string& path, const char* family,
                              const AdaSingleOptionDefaults& defaults);

}  // namespace ditgen::models
