// What turns a model's inputs into the vectors its blocks read, as
// diffusers' embedding modules hold them; all held whole on every rank
// (small: every rank needs all of their output).
//   TimestepEmbedding  linear_1, SiLU, linear_2 on a sinusoidal embedding
//                      of 256 channels (diffusers' TimestepEmbedding fed by
//                      Timesteps(256, flip_sin_to_cos, shift); Wan: freq_dim
//                      channels, read from linear_1's width).
//   LabelEmbedding     a class table read by rows (DiT's class_embedder;
//                      the last row is the null class of CFG).
//   PatchEmbed         PatchEmbed's stride-p convolution as patchify and a
//                      linear, plus a position table; or a video's Conv3d
//                      with kernel = stride = (pt, ph, pw) as patchify3d and
//                      a linear (Wan's patch_embedding, no positions).
//   TextProjection     PixArtAlphaTextProjection: linear_1, GELU (tanh),
//                      linear_2 on every text row (the caption projection).
// Profiling scopes (util/profile.h): adaln (the conditioning a modulation
// is made from: timestep and label embeddings), patch_embed,
// caption_projection.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// diffusers' get_1d_sincos_pos_embed_from_grid for one position: out[k] =
// sin(pos * w_k), out[dim/2 + k] = cos(pos * w_k), w_k = 10000^(-k / (dim/2)),
// in float64 rounded once (dim even). Latte's temporal table, CogVideoX's
// 3-D one.
void sincos_1d(double pos, int64_t dim, float* out);

// diffusers' two-linear MLPs (TimestepEmbedding, PixArtAlphaTextProjection):
// linear_1 (W, in), an activation, linear_2 (W, W), held whole.
struct TwoLinears {
  static TensorDecls tensors(const std::string& prefix, int64_t in, int64_t width);
  static TwoLinears load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);
  enum class Act { kSilu, kGeluTanh };  // GELU (tanh) fused into linear_1's GEMM
  // (R, in) -> (R, W): linear_2(act(linear_1(x))).
  Tensor operator()(const Tensor& x, Act act) const;

  Linear linear_1;  // (W, in)
  Linear linear_2;  // (W, W)
};

class TimestepEmbedding {
 public:
  static constexpr int64_t kChannels = 256;  // Timesteps(num_channels=256)
  // Under `prefix` ("adaln_single.emb.timestep_embedder."), W = width, on
  // sinusoids of `channels`.
  static TensorDecls tensors(const std::string& prefix, int64_t width, int64_t channels = kChannels);
  static TimestepEmbedding load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);

  // The sinusoids of `values` (diffusers' get_timestep_embedding with
  // flip_sin_to_cos and downscale_freq_shift `shift`), (len, channels) on place.
  static Tensor sinusoid(const std::vector<float>& values, float shift, const Placement& place,
                         int64_t channels = kChannels);
  // (R, channels) sinusoids -> (R, W).
  Tensor operator()(const Tensor& sinusoid) const;
  // The sinusoid width linear_1 reads.
  int64_t channels() const { return channels_; }

  TwoLinears mlp;  // linear_1 (W, channels), SiLU, linear_2 (W, W)

 private:
  int64_t channels_ = kChannels;
};

class LabelEmbedding {
 public:
  // `name`: the table ("...class_embedder.embedding_table.weight"), classes + 1 rows of `width`.
  static TensorDecls tensors(const std::string& name, int64_t classes, int64_t width);
  static LabelEmbedding load(const io::WeightStore& weights, const std::string& name, const Placement& place);
  // (B, W): the rows of `labels`.
  Tensor operator()(const std::vector<int64_t>& labels) const;

  Tensor table;  // (classes + 1, W)
};

class PatchEmbed {
 public:
  // Under `prefix` ("pos_embed.proj."): the conv weight (D, C, p, p) and bias (D).
  static TensorDecls tensors(const std::string& prefix, int64_t dim, int64_t in_channels, int64_t patch);
  // A video's: the Conv3d weight (D, C, pt, ph, pw) and bias (D).
  static TensorDecls tensors3d(const std::string& prefix, int64_t dim, int64_t in_channels,
                               std::array<int64_t, 3> patch);
  static PatchEmbed load(const io::WeightStore& weights, const std::string& prefix, int64_t patch,
                         const Placement& place);
  static PatchEmbed load3d(const io::WeightStore& weights, const std::string& prefix, std::array<int64_t, 3> patch,
                           const Placement& place);

  // (B, C, H, W) host images -> (B, N, C*p*p) patches on place; a 3-D
  // embedding's (B, C, T, H, W) videos -> (B, N, C*pt*ph*pw), tokens in
  // (t, h, w) order.
  Tensor patches(const Tensor& images) const;
  // (B, P, C*p*p) rows of patches -> (B, P, D) tokens plus positions (P, D).
  Tensor operator()(const Tensor& patch_rows, const Tensor& positions) const;
  // The same without positions (Wan: rotary positions inside the attention).
  Tensor operator()(const Tensor& patch_rows) const;

 private:
  std::array<int64_t, 3> patch_ = {0, 0, 0};  // (1, p, p) for images: patchify; else patchify3d
  bool video_ = false;
  Placement place_;
  Tensor weight_;  // (D, C*p*p) or (D, C*pt*ph*pw): the convolution as a linear
  Tensor bias_;    // (D)
};

class TextProjection {
 public:
  // Under `prefix` ("caption_projection."): text of width `in` to D.
  static TensorDecls tensors(const std::string& prefix, int64_t in, int64_t dim);
  static TextProjection load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);
  // (B, L, in) host text -> (B, L, D) on place.
  Tensor operator()(const Tensor& text) const;

 private:
  Placement place_;
  TwoLinears mlp_;  // linear_1 (D, in), GELU (tanh), linear_2 (D, D)
};

}  // namespace ditgen::models::nn
