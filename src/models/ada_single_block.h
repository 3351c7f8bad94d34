// What PixArt and Latte share (docs/design.md §6), as compositions of the
// modules of models/nn/:
//   AdaSingleBlock  diffusers' BasicTransformerBlock with norm_type
//                   ada_norm_single (and, with its own dims, Wan's
//                   WanTransformerBlock): an nn::TransformerBlock (modulated
//                   self-attention, optional cross-attention without
//                   modulation, modulated gelu-tanh MLP; LayerNorms without
//                   affine at norm_eps) whose (B, 6D) modulation is the
//                   model's shared adaLN-single vector plus the block's own
//                   scale_shift_table.
//   AdaSingleStem   what both hold outside their blocks: the patch
//                   embedding, adaln_single (timestep embedding and the
//                   shared modulation), the caption projection and the
//                   final layer (its (2, D) table plus the embedded
//                   timestep).
// The self-attention core is the family's (PixArt: sequence-parallel
// attention over the whole image; Latte's temporal blocks: attention
// across frames behind the DSP switch). AdaSingleModel is what either
// model holds besides its blocks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/safetensors.h"
#include "models/ada_single_config.h"
#include "models/nn/embeddings.h"
#include "models/nn/final_layer.h"
#include "models/nn/modulation.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/transformer_block.h"
#include "models/placement.h"
#include "models/shard_groups.h"
#include "models/stage.h"
#include "models/transformer.h"
#include "tensor/tensor.h"

namespace ditgen::models {

class AdaSingleBlock {
 public:
  // Its tensors under `prefix` ("transformer_blocks.3."), whole; `cross`:
  // whether it has a cross-attention to the (caption-projected) text.
  static nn::TensorDecls tensors(const std::string& prefix, const AdaSingleConfig& cfg, bool cross);
  // This rank's part (tp must divide heads and ff_inner_dim; the shard's
  // communicators outlive the block).
  static AdaSingleBlock load(const io::WeightStore& weights, const std::string& prefix, const AdaSingleConfig& cfg,
                             bool cross, const ShardGroups& shard, const Placement& place);
  // The same block of other dims (Wan's: q/k norms, norm2, "ffn."), its
  // table stored (1, 6, D) when `table_leading_one`.
  static nn::TensorDecls tensors(const std::string& prefix, const nn::TransformerBlockDims& dims,
                                 bool table_leading_one);
  static AdaSingleBlock load(const io::WeightStore& weights, const std::string& prefix,
                             const nn::TransformerBlockDims& dims, const ShardGroups& shard, const Placement& place);

  // hidden (B, P, D) += the block's branches, in place; shared_mod (B, 6D)
  // the model's adaLN-single modulation, before this block's table.
  void forward(Tensor& hidden, const Tensor& shared_mod, const nn::BlockInputs& in) const;
  // Its self-attention's modulated input (TeaCache's signal), (B, P, D).
  Tensor attention_input(const Tensor& hidden, const Tensor& shared_mod) const {
    return body_.attention_input(hidden, nn::Modulation(table_.add_to(shared_mod), dim_));
  }

  const nn::TransformerBlock& body() const { return body_; }

 private:
  int64_t dim_ = 0;            // D
  nn::ScaleShiftTable table_;  // (6, D) scale_shift_table
  nn::TransformerBlock body_;  // attn1, attn2, ff
};

struct AdaSingleStem {
  nn::PatchEmbed patch;        // pos_embed.proj: (D, C, p, p)
  nn::AdaLnSingle adaln;       // adaln_single: timestep embedder, linear (6D, D)
  nn::TextProjection caption;  // caption_projection: (D, caption), (D, D)
  nn::FinalLayer final_layer;  // scale_shift_table (2, D), proj_out (p*p*out, D)
  Tensor native_positions;     // (grid^2, D) the positions of the sample_size grid, made once

  static nn::TensorDecls tensors(const AdaSingleConfig& cfg);
  static AdaSingleStem load(const io::WeightStore& weights, const AdaSingleConfig& cfg, const Placement& place);
  // The (grid_h * grid_w, D) positions of a token grid on place.
  Tensor positions(const AdaSingleConfig& cfg, int64_t grid_h, int64_t grid_w, const Placement& place) const;
};

// What a PixArt or Latte model holds besides its blocks: its config, its
// place in the layout and the stem around the blocks, and the accessors
// both give.
template <class Config>
class AdaSingleModel {
 public:
  const Config& config() const { return cfg_; }
  // The 2-D position table diffusers adds for a gh x gw token grid, (gh*gw, D).
  Tensor position_table(int64_t grid_h, int64_t grid_w) const { return cfg_.position_table(grid_h, grid_w); }

 protected:
  // Places the model in the layout and loads its stem (tensors checked already).
  void load_stem(const io::WeightStore& weights, const Config& cfg, const ShardGroups& shard, const Placement& place) {
    cfg_ = cfg;
    stage_ = Stage(shard, place, cfg.num_layers);
    stem_ = AdaSingleStem::load(weights, cfg, place);
  }

  Config cfg_;
  Stage stage_;         // sp attention, PipeFusion stage, placement
  AdaSingleStem stem_;  // patch embedding, adaln_single, caption projection, final layer
};

}  // namespace ditgen::models
