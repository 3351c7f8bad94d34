// What PixArt and Latte share (DESIGN.md §6), as compositions of the
// modules of models/nn/:
//   AdaSingleBlock  diffusers' BasicTransformerBlock with norm_type
//                   ada_norm_single: an nn::TransformerBlock (modulated
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
// across frames behind the DSP switch).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/safetensors.h"
#include "models/nn/embeddings.h"
#include "models/nn/final_layer.h"
#include "models/nn/modulation.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/transformer_block.h"
#include "models/placement.h"
#include "models/shard_groups.h"
#include "models/transformer.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct AdaSingleBlockDims {
  int64_t heads = 0, head_dim = 0;  // D = heads * head_dim
  int64_t ff_inner = 0;             // F
  int64_t cross_dim = 0;            // width of the text the cross-attention reads; 0 = no cross-attention
  float norm_eps = 1e-6f;
  int64_t inner_dim() const { return heads * head_dim; }
};

class AdaSingleBlock {
 public:
  // Its tensors under `prefix` ("transformer_blocks.3."), whole.
  static nn::TensorDecls tensors(const std::string& prefix, const AdaSingleBlockDims& dims);
  // This rank's part (tp must divide heads and ff_inner; the shard's
  // communicators outlive the block).
  static AdaSingleBlock load(const io::WeightStore& weights, const std::string& prefix, const AdaSingleBlockDims& dims,
                             const ShardGroups& shard, const Placement& place);

  // hidden (B, P, D) += the block's branches, in place; shared_mod (B, 6D)
  // the model's adaLN-single modulation, before this block's table.
  void forward(Tensor& hidden, const Tensor& shared_mod, const nn::BlockInputs& in) const;

  const nn::TransformerBlock& body() const { return body_; }

 private:
  int64_t dim_ = 0;               // D
  nn::ScaleShiftTable table_;     // (6, D) scale_shift_table
  nn::TransformerBlock body_;     // attn1, attn2, ff
};

struct AdaSingleStemDims {
  int64_t inner = 0;             // D
  int64_t in_channels = 0, out_channels = 0;
  int64_t patch = 0;             // p
  int64_t caption_channels = 0;  // width of the text embeddings
};

struct AdaSingleStem {
  nn::PatchEmbed patch;          // pos_embed.proj: (D, C, p, p)
  nn::AdaLnSingle adaln;         // adaln_single: timestep embedder, linear (6D, D)
  nn::TextProjection caption;    // caption_projection: (D, caption), (D, D)
  nn::FinalLayer final_layer;    // scale_shift_table (2, D), proj_out (p*p*out, D)

  static nn::TensorDecls tensors(const AdaSingleStemDims& dims);
  static AdaSingleStem load(const io::WeightStore& weights, const AdaSingleStemDims& dims, const Placement& place);
};

// The text arguments of a text-conditional forward against a batch of
// `batch` samples: text (batch, L, caption_channels), text_lengths empty or
// batch values in [1, L]. Calls fail(message) otherwise.
void check_text_args(const ForwardArgs& args, int64_t batch, int64_t caption_channels,
                     const std::function<void(const std::string&)>& fail);

}  // namespace ditgen::models
