// CogVideoX (1.0): diffusers' CogVideoXTransformer3DModel (CogVideoX-2b,
// -5b text-to-video), on the placement's device and dtype like the other
// families. Every size comes from config.json (CogVideoXConfig); every
// tensor is checked by name and shape before any is loaded.
//
// An MM-DiT: the text's L rows and the video's N = F*h*w/p^2 patches form
// one joint sequence of L + N tokens, text first, that every block's
// self-attention, norms and feed-forward run over; the two kinds of rows
// differ only in their adaLN modulation (and rotary positions, video only):
// models/nn/joint_attention.h. A composition of the modules of models/nn/:
//   patch_embed          a Conv2d with kernel = stride = p on each frame as
//                        patchify3d (1, p, p) + a linear (nn::PatchEmbed),
//                        tokens in (frame, row, column) order, plus the 3-D
//                        sin-cos positions (2b: use_rotary_positional_
//                        embeddings false) of the latent's size; text_proj
//                        a linear of the text
//   time_embedding       the timestep sinusoid of D channels (flip_sin_to_
//                        cos, freq_shift) -> linear, SiLU, linear = emb
//                        (B, time_embed_dim)
//   transformer_blocks   per layer: norm1 (nn::JointNormZero: the video
//                        rows' shift, scale, gate, then the text rows'),
//                        attn1 over the joint sequence (nn::JointAttention:
//                        q/k LayerNorm per head; 3-D rotary positions on the
//                        video rows' q and k through nn::RotaryTable, 5b),
//                        gated residuals; norm2 the same, then the gelu-tanh
//                        feed-forward over the joint sequence
//   norm_final, norm_out nn::LayerNorm; AdaLayerNorm (shift, scale = a
//                        linear of SiLU(emb), its LayerNorm's affine folded
//                        in: nn::fold_norm_affine); proj_out (its patch
//                        loaded channels last); the video rows unpatchified
//                        (ops::unpatchify3d)
// Under sp (ulysses, ring) each rank holds a contiguous shard of the joint
// sequence (the text rows fall to the first ranks) and rotates its q and k
// with the table rows of its own tokens (the text's rows: cos 1, sin 0);
// PipeFusion's patches are bands of the same sequence. Under tp each rank
// holds its heads (the q/k norms are per head) and feed-forward features.
// Every rank returns the full output.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/nn/attention.h"
#include "models/nn/embeddings.h"
#include "models/nn/feed_forward.h"
#include "models/nn/final_layer.h"
#include "models/nn/joint_attention.h"
#include "models/nn/linear.h"
#include "models/nn/modulation.h"
#include "models/nn/norm.h"
#include "models/nn/pab_branch.h"
#include "models/nn/rotary.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "models/stage.h"
#include "models/transformer.h"
#include "models/transformer_sizes.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// transformer/config.json. TransformerSizes' patch_size is the spatial
// patch, sample_size 0 (the native size is sample_height x sample_width
// latents), ff_inner_dim 4 * inner_dim (diffusers' FeedForward default).
struct CogVideoXConfig : TransformerSizes {
  int64_t text_dim = 4096;        // text_embed_dim: the T5 hidden size
  int64_t time_embed_dim = 512;   // emb's width: what every modulation reads
  float freq_shift = 0.0f;        // the timestep sinusoid's downscale_freq_shift
  int64_t sample_width = 90, sample_height = 60;  // latents the model was trained at
  int64_t sample_frames = 49;     // frames (before the VAE's temporal compression)
  int64_t temporal_compression_ratio = 4;
  int64_t max_text_seq_length = 226;  // the sin-cos table's text rows (2b): the text length it takes
  float norm_eps = 1e-5f;             // norm1/2, norm_final, norm_out
  double spatial_interpolation_scale = 1.875, temporal_interpolation_scale = 1.0;
  bool rotary = false;  // use_rotary_positional_embeddings (5b); else 3-D sin-cos positions (2b)

  // The (latent frames, h, w) token grid of the model's own size.
  std::array<int64_t, 3> native_grid() const;
  // The rotary channels of the t, h, w axes (head_dim / 4, 3/8, 3/8).
  std::array<int64_t, 3> rotary_dims() const;
  // Values per token of proj_out: p * p * out_channels (stored (c, i, j), loaded (i, j, c)).
  int64_t out_per_token() const { return patch_size * patch_size * out_channels; }

  // Reads transformer/config.json as CogVideoXTransformer3DModel.__init__
  // does (absent keys take diffusers' defaults). ModelError naming `path`
  // and the key for anything mistyped or out of range; ConfigError "not
  // supported yet" (exit 2) for CogVideoX 1.5 (patch_size_t), image-to-video
  // models (ofs_embed_dim, learned positions, in_channels != out_channels)
  // and block options the published models do not use.
  static CogVideoXConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

// One CogVideoXBlock over this rank's rows of the joint sequence, held as
// its text rows and its video rows apart (either may be empty).
class CogVideoXBlock {
 public:
  static nn::TensorDecls tensors(const std::string& prefix, const CogVideoXConfig& cfg);
  static CogVideoXBlock load(const io::WeightStore& weights, const std::string& prefix, const CogVideoXConfig& cfg,
                             const ShardGroups& shard, const Placement& place);

  // rows: the band's text (B, Pt, D) and video (B, Pv, D) rows, updated in
  // place; emb (B, T); rotary null without rotary positions.
  void forward(nn::JointRows& rows, const Tensor& emb, const nn::AttentionCore& core, const nn::Rotary* rotary,
               const nn::PabSite& pab) const;

 private:
  ShardGroups shard_;
  nn::JointNormZero norm1_, norm2_;  // (6D, T) each, and their LayerNorms' (D)
  nn::JointAttention attn1_;         // to_q/k/v (Dl, D), to_out (D, Dl), norm_q/k (head_dim)
  nn::FeedForward ff_;               // (Fl, D), (D, Fl)
};

class CogVideoXTransformer {
 public:
  // The model class contract of models/family_spec.h.
  static nn::TensorDecls stem_tensors(const CogVideoXConfig& cfg);
  static nn::TensorDecls layer_tensors(const CogVideoXConfig& cfg, int64_t layer);

  static CogVideoXTransformer load(const io::WeightStore& weights, const CogVideoXConfig& cfg,
                                   const ShardGroups& shard = {}, const Placement& place = {});

  // args: latents (B, in_channels, F, h, w) with h, w multiples of the
  // patch; B timesteps; text (B, L, text_dim), every row attended (L =
  // max_text_seq_length for a sin-cos model). Returns (B, out_channels, F,
  // h, w) host float32 on every rank.
  Tensor forward(const ForwardArgs& args) const;

  // The 3-D sin-cos positions of a (frames, gh, gw) token grid (diffusers'
  // get_3d_sincos_pos_embed: D/4 channels of the frame, then 3D/8 of the
  // column and 3D/8 of the row), (frames*gh*gw, D) host float32.
  static Tensor sincos_positions(const CogVideoXConfig& cfg, std::array<int64_t, 3> grid);
  // The rotary tables of L text rows (cos 1, sin 0) and a (frames, gh, gw)
  // token grid as CogVideoXPipeline makes them (the grid resized and
  // cropped into sample_height x sample_width / p, get_3d_rotary_pos_embed
  // in float32), (L + frames*gh*gw, head_dim) host float32.
  static ops::RotaryTables rotary_tables(const CogVideoXConfig& cfg, int64_t text_rows, std::array<int64_t, 3> grid);

  const CogVideoXConfig& config() const { return cfg_; }

 private:
  // A forward's sizes: the joint sequence of text rows and the video's
  // (frames, h/p, w/p) token grid.
  struct Sequence {
    int64_t batch = 0;
    std::array<int64_t, 3> grid = {0, 0, 0};
    int64_t text_rows = 0;
    int64_t tokens = 0;  // text_rows + frames * h/p * w/p
  };
  // The arguments checked (RuntimeFailure "CogVideoX forward: ..."), and their sizes.
  Sequence check_args(const ForwardArgs& args) const;

  CogVideoXConfig cfg_;
  Stage stage_;                         // sp attention, PipeFusion stage, placement
  nn::PatchEmbed patch_;                // patch_embed.proj: (D, C, p, p) as a linear
  nn::Linear text_proj_;                // patch_embed.text_proj: (D, text_dim)
  nn::TimestepEmbedding time_;          // time_embedding: (T, D), (T, T)
  nn::LayerNorm norm_final_;            // (D)
  nn::FinalLayer final_;                // norm_out.linear (2D, T), proj_out (p*p*out, D)
  nn::LayerNorm norm_out_;              // (D) norm_out.norm, host float32: folded into its modulation
  Tensor native_positions_;             // (N, D) the native grid's sin-cos table (2b layout, first stage)
  std::vector<CogVideoXBlock> blocks_;  // this stage's layers, in order
};

}  // namespace ditgen::models
