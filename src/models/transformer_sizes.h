// The sizes every DiT-style transformer's config.json gives (diffusers'
// Transformer2DModel keys), read and checked once here for every family
// (DitConfig, and PixArt's and Latte's AdaSingleConfig, derive from it and
// read what is their own), the block options the families support in one
// form only, and the part of a Workload (parallel/layout.h) these sizes
// fix.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/nn/tensor_decl.h"
#include "parallel/layout.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct TransformerSizes {
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;  // 2 * in_channels when sigma is learned
  int64_t sample_size = 0;   // (native) latent height = width
  int64_t patch_size = 0;
  int64_t ff_inner_dim = 0;  // 4 * inner_dim unless a family's config says otherwise

  int64_t inner_dim() const { return num_heads * head_dim; }
  int64_t grid() const { return sample_size / patch_size; }  // tokens per side at sample_size (PatchEmbed's base_size)

  // Reads num_layers, num_attention_heads, attention_head_dim, in_channels,
  // out_channels (null: in_channels), sample_size and patch_size; ModelError
  // naming `path` and the key for anything missing, mistyped or out of
  // range (sample_size a multiple of patch_size, the inner dimension of 4,
  // for the 2-D sin-cos positions). ff_inner_dim = 4 * inner_dim.
  static TransformerSizes read(const nlohmann::json& cfg, const std::string& path);
};

// The block options of a config.json, as diffusers defaults them for the
// family's class when a key is missing.
struct BlockOptionDefaults {
  const char* activation_fn;
  bool norm_elementwise_affine;
  bool attention_bias;
};

// The latent (h, w) of a requested image or video frame of height x width
// pixels (0: default_height / default_width) through a VAE of `vae_factor`
// pixels per latent and a patch of `patch` latents: ConfigError naming
// `where` (".height/width") unless both are positive multiples of
// vae_factor x patch, with the nearest sizes that are.
std::pair<int64_t, int64_t> latent_size(int64_t height, int64_t width, int64_t default_height, int64_t default_width,
                                        int64_t vae_factor, int64_t patch, const std::string& where);

// ModelError "not supported yet" unless the block is the one the families
// publish: gelu-approximate, LayerNorms without affine, attention biases;
// `family` ("PixArt") names the model in messages.
void check_block_options(const nlohmann::json& cfg, const std::string& path, const char* family,
                         const BlockOptionDefaults& defaults);

// What a forward over one output of shape `latent` ((C, h, w), or (C, F,
// h, w) for a video) asks of the layout: widths, tokens per image or
// frame, frames, element counts; each layer's attention operations, of
// these kinds in this order, every one over num_heads heads and attending
// to what its kind says (the tokens of an image or frame, a token's frames,
// every frame's tokens, or the text, whose length the config does not
// fix), and its `feed_forwards` MLPs; the weights of `layer` (one layer's
// tensors) and `once` (the rest). The family adds what it gathers over tp
// and the tables it keeps.
parallel::Workload sized_workload(const TransformerSizes& sizes, const Shape& latent,
                                  const std::vector<parallel::AttentionKind>& attention, int64_t feed_forwards,
                                  const nn::TensorDecls& layer, const nn::TensorDecls& once);

}  // namespace ditgen::models
