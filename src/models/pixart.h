// PixArt: diffusers' PixArtTransformer2DModel (text-conditional, adaLN-single
// blocks shared with Latte: models/ada_single_block.h), on the placement's
// device and dtype like DiT. Every size comes from config.json (PixArtConfig);
// every tensor is checked by name and shape before any is loaded. Any latent
// grid runs: the 2-D sin-cos positions are diffusers' interpolated table for
// the actual grid (the native one is made once at load).
//
// A composition of the modules of models/nn/: the stem and blocks PixArt
// shares with Latte (models/ada_single_block.h) and two more timestep
// embedders for the micro-conditions. Under a parallel layout each rank
// loads its heads and MLP features (tp) and runs its own tokens (sp)
// through the src/parallel/ module, as DiT does; the text, its projection,
// the timestep embedding and the shared adaLN-single modulation are small
// and held whole on every rank. Every rank returns the full output.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "io/safetensors.h"
#include "models/ada_single_block.h"
#include "models/ada_single_config.h"
#include "models/placement.h"
#include "models/stage.h"
#include "models/transformer.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct PixArtConfig : AdaSingleConfig {
  // The 1024 models' resolution / aspect-ratio micro-conditions.
  bool use_additional_conditions = false;

  // Reads transformer/config.json. ModelError naming `path` and the key for
  // anything missing, mistyped or unsupported (cross_attention_dim other
  // than the inner dimension, another activation, norm or attention type).
  static PixArtConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class PixArtTransformer : public AdaSingleModel<PixArtConfig> {
 public:
  // The model class contract of models/family_spec.h.
  static nn::TensorDecls stem_tensors(const PixArtConfig& cfg);
  static nn::TensorDecls layer_tensors(const PixArtConfig& cfg, int64_t layer);

  static PixArtTransformer load(const io::WeightStore& weights, const PixArtConfig& cfg, const ShardGroups& shard = {},
                                const Placement& place = {});

  // args: latents (B, in_channels, h, w) with h, w multiples of patch_size;
  // B timesteps; text (B, L, caption_channels) with optional text_lengths;
  // resolution and aspect_ratio when the model uses micro-conditions.
  // Returns (B, out_channels, h, w) host float32 on every rank of the shard.
  Tensor forward(const ForwardArgs& args) const;


 private:
  // embedded_timestep (B, D): the timestep embedding plus the micro-conditions.
  Tensor embedded_timestep(const ForwardArgs& args) const;
  void check_args(const ForwardArgs& args) const;

  nn::TimestepEmbedding resolution_embedder;    // W = D/3 (micro-conditions only)
  nn::TimestepEmbedding aspect_ratio_embedder;  // W = D/3 (micro-conditions only)
  std::vector<AdaSingleBlock> blocks_;          // this stage's layers (parallel/patch_pipeline.h), in order
};

}  // namespace ditgen::models
