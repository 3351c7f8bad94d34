// Wan: diffusers' WanTransformer3DModel (Wan 2.1 and 2.2 text-to-video;
// image-to-video: Wan 2.1 I2V and FLF2V, Wan 2.2 I2V-A14B and TI2V-5B), on
// the placement's device and dtype like PixArt and Latte. Every size comes
// from config.json (WanConfig); every tensor is checked by name and shape
// before any is loaded.
//
// A composition of the modules of models/nn/:
//   patch_embedding      a Conv3d with kernel = stride = (1, 2, 2) as
//                        patchify3d + a linear (nn::PatchEmbed::load3d);
//                        tokens in (frame, row, column) order, F*h*w of them
//   condition_embedder   the timestep sinusoid (freq_dim, flip_sin_to_cos)
//                        -> time_embedder (linear, SiLU, linear) = temb,
//                        time_proj of SiLU(temb) = the (B, 6D) modulation
//                        every block shares (nn::AdaLnSingle), and the text
//                        embedder (linear, GELU tanh, linear: nn::TextProjection);
//                        image_dim models: the image embedder
//                        (models/wan_image_embedding.h) on the image
//                        encoder's tokens. With per-token timesteps (TI2V's
//                        expand_timesteps) temb and the modulation are per
//                        token, (B*n, D) and (B*n, 6D), and each block and
//                        norm_out modulate token by token
//                        (nn::Modulation's per-token form)
//   blocks               per layer an adaLN-single block (models/
//                        ada_single_block.h: its (1, 6, D) scale_shift_table
//                        + the shared modulation): self-attention over every
//                        token of every frame with q/k RMSNorm across heads
//                        and the 3-D rotary positions (nn::Attention's
//                        rotary hook), cross-attention to the text after
//                        norm2 (LayerNorm with affine, cross_attn_norm), the
//                        same q/k norms, no gate (image_dim models: the
//                        image tokens' own keys and values, add_k_proj /
//                        add_v_proj / norm_added_k, attended by the same
//                        queries and added before to_out); gelu-tanh "ffn"
//   norm_out + proj_out  its (1, 2, D) table + temb (no SiLU), LayerNorm at
//                        eps, proj_out, unpatchify3d
// Under sp (ulysses, ring) each rank holds a contiguous shard of the whole
// video's F*h*w tokens (the attention spans every frame: no dsp) and rotates
// its q and k with the table rows of its own tokens; PipeFusion's patches
// are bands of the same sequence. Under tp each rank holds its heads and
// feed-forward features (add_k_proj / add_v_proj split like to_k / to_v);
// the q/k norms (and norm_added_k) span all heads: their squared sums are
// all-reduced over tp (nn/attention.h). The text and the image tokens are
// context: every rank holds them whole, under every layout. Every rank
// returns the full output.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/ada_single_block.h"
#include "models/nn/embeddings.h"
#include "models/nn/final_layer.h"
#include "models/nn/modulation.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "models/stage.h"
#include "models/transformer.h"
#include "models/transformer_sizes.h"
#include "models/wan_image_embedding.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// transformer/config.json. TransformerSizes' patch_size is the spatial
// patch (ph = pw), sample_size 0 (Wan has no native size in its config),
// ff_inner_dim ffn_dim.
struct WanConfig : TransformerSizes {
  std::array<int64_t, 3> patch = {1, 2, 2};  // (pt, ph, pw)
  int64_t text_dim = 4096;                   // the UMT5 hidden size
  int64_t freq_dim = 256;                    // timestep sinusoid channels
  bool cross_attn_norm = true;
  float eps = 1e-6f;                         // norm1/2/3, norm_out, q/k norms
  int64_t rope_max_seq_len = 1024;           // positions per axis the rotary tables cover
  // Image-to-video (Wan 2.1 I2V, FLF2V): the image encoder's token width
  // (1280, CLIP ViT-H's) and added_kv_proj_dim (= inner_dim); 0 = none.
  int64_t image_dim = 0;
  int64_t added_kv_dim = 0;
  int64_t pos_embed_seq_len = 0;  // first-last-frame: the image tokens (2 x 257) with learned positions; 0 = none

  // The rotary channels of the t, h, w axes (44, 42, 42 for head_dim 128).
  std::array<int64_t, 3> rotary_dims() const;
  // Values per token of proj_out: pt * ph * pw * out_channels.
  int64_t out_per_token() const { return patch[0] * patch[1] * patch[2] * out_channels; }

  // Reads transformer/config.json as WanTransformer3DModel.__init__ does
  // (absent keys take diffusers' defaults). ModelError naming `path` and the
  // key for anything mistyped or out of range (image_dim without
  // added_kv_proj_dim = inner_dim, or the reverse; pos_embed_seq_len without
  // image_dim); ConfigError "not supported yet" (exit 2) for a patch other
  // than (1, p, p), another qk_norm.
  static WanConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class WanTransformer {
 public:
  // The model class contract of models/family_spec.h.
  static nn::TensorDecls stem_tensors(const WanConfig& cfg);
  static nn::TensorDecls layer_tensors(const WanConfig& cfg, int64_t layer);

  static WanTransformer load(const io::WeightStore& weights, const WanConfig& cfg, const ShardGroups& shard = {},
                             const Placement& place = {});

  // args: latents (B, in_channels, F, h, w) with F, h, w multiples of the
  // patch; B timesteps, or B * F*h*w token_timesteps (TI2V) besides them;
  // text (B, L, text_dim) with optional text_lengths (each sample's first
  // rows the cross-attention sees; WanPipeline: all); image (B, M,
  // image_dim) for an image_dim model (M = pos_embed_seq_len when set),
  // refused for another. Returns (B, out_channels, F, h, w) host float32 on
  // every rank.
  Tensor forward(const ForwardArgs& args) const;

  const WanConfig& config() const { return cfg_; }

 private:
  void check_args(const ForwardArgs& args) const;

  WanConfig cfg_;
  Stage stage_;                        // sp attention, PipeFusion stage, placement
  nn::PatchEmbed patch_;               // patch_embedding: (D, C*pt*ph*pw)
  nn::AdaLnSingle time_;               // condition_embedder.time_embedder (D, freq_dim), (D, D); time_proj (6D, D)
  nn::TextProjection text_;            // condition_embedder.text_embedder: (D, text_dim), (D, D)
  WanImageEmbedding image_;            // condition_embedder.image_embedder: image_dim models only
  nn::FinalLayer final_;               // scale_shift_table (1, 2, D), proj_out (pt*ph*pw*out, D)
  std::vector<AdaSingleBlock> blocks_;  // this stage's layers, in order
};

}  // namespace ditgen::models
