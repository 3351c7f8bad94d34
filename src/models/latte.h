// Latte: diffusers' LatteTransformer3DModel (text-to-video), on the
// placement's device and dtype like PixArt, whose adaLN-single block it
// shares (models/ada_single_block.h). Every size comes from config.json
// (LatteConfig); every tensor is checked by name and shape before any is
// loaded.
//
// A video's latents (B, C, F, h, w) are patchified frame by frame into
// (B*F, N, D) tokens with PixArt's 2-D sin-cos positions; each layer runs
//   a spatial block over the N tokens of each frame (self-attention,
//     cross-attention to the prompt, MLP), then
//   a temporal block over the F frames of each token (self-attention
//     across frames, MLP; no cross-attention), with the 1-D sin-cos
//     temporal position table added before the first one when F > 1.
// The residual stream stays (B*F, N, D) throughout: every per-token op of
// the temporal block is indifferent to the order of tokens, and its
// attention reads the frames of a token straight from that layout (strided
// operands, no transpose). Both blocks take the same (B, 6D) modulation per
// video (diffusers repeats it per frame and per token).
//
// Under tp each rank loads its heads and MLP features of both blocks (the
// block does the slicing); the text, the timestep embedding and the shared
// modulation are small and held whole. Under sp (docs/design.md §4):
//   dsp (Dynamic Sequence Parallel): each rank holds its frames of every
//     video, all their tokens, so the spatial blocks run without
//     communication; the temporal attention switches to a token shard
//     (every frame of its tokens) and back through one all-to-all each way,
//     inside the temporal block's attention branch (a PAB reuse skips both);
//   ulysses, ring: each rank holds its tokens of every frame; the spatial
//     self-attention gathers the frame's tokens as for an image, and the
//     temporal attention needs no communication at all, since the frames
//     of a token are already on one rank.
//   PipeFusion (pp): a patch is a band of tokens of every frame; its
//     spatial attention reads the whole frame's kept keys and values
//     (parallel/patch_pipeline.h), its temporal attention is exact (every
//     frame of its tokens is in the patch).
// The output is gathered (frames or tokens) so every rank has it whole.
#pragma once
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

struct LatteConfig : AdaSingleConfig {  // num_layers: spatial blocks; as many temporal blocks
  int64_t video_length = 0;  // the frames the model was trained on (temp_pos_embed's rows)
  // interpolation_scale is max(sample_size // 64, 1): diffusers has no key for it.

  // Reads transformer/config.json. ModelError naming `path` and the key for
  // anything missing, mistyped or unsupported (cross_attention_dim other
  // than the inner dimension, another activation, norm or attention type).
  static LatteConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class LatteTransformer : public AdaSingleModel<LatteConfig> {
 public:
  // PAB cache parts (pab/broadcast.h) of a layer's two blocks.
  static constexpr int kSpatialPart = 0, kTemporalPart = 1;

  // The model class contract of models/family_spec.h; layer i holds two
  // blocks (spatial, then temporal).
  static nn::TensorDecls stem_tensors(const LatteConfig& cfg);
  static nn::TensorDecls layer_tensors(const LatteConfig& cfg, int64_t layer);

  static LatteTransformer load(const io::WeightStore& weights, const LatteConfig& cfg, const ShardGroups& shard = {},
                               const Placement& place = {});

  // args: latents (B, in_channels, F, h, w) with h, w multiples of
  // patch_size and any F >= 1 (under dsp at least sp frames and tokens); B
  // timesteps; text (B, L, caption_channels) with optional text_lengths
  // (each sample's first rows the cross-attention sees). Returns (B,
  // out_channels, F, h, w) host float32.
  Tensor forward(const ForwardArgs& args) const;

  // The temporal position table for F frames, (F, D): row f = [sin(f * w_k),
  // cos(f * w_k)], w_k = 10000^(-k / (D/2)), k < D/2 (diffusers'
  // get_1d_sincos_pos_embed_from_grid, in float64). diffusers' temp_pos_embed
  // is this table for F = video_length; its rows do not depend on F.
  Tensor temporal_table(int64_t frames) const;

 private:
  void check_args(const ForwardArgs& args) const;

  Tensor native_temporal;                 // (video_length, D) temp_pos_embed
  std::vector<AdaSingleBlock> spatial_;   // transformer_blocks of this stage's layers
  std::vector<AdaSingleBlock> temporal_;  // temporal_transformer_blocks of this stage's layers
};

}  // namespace ditgen::models
