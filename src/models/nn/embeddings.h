// What turns a model's inputs into the vectors its blocks read, as
// diffusers' embedding modules hold them; all held whole on every rank
// (small: every rank needs all of their output).
//   TimestepEmbedding  linear_1, SiLU, linear_2 on a sinusoidal embedding
//                      of 256 channels (diffusers' TimestepEmbedding fed by
//                      Timesteps(256, flip_sin_to_cos, shift)).
//   LabelEmbedding     a class table read by rows (DiT's class_embedder;
//                      the last row is the null class of CFG).
//   PatchEmbed         PatchEmbed's stride-p convolution as patchify and a
//                      linear, plus a position table.
//   TextProjection     PixArtAlphaTextProjection: linear_1, GELU (tanh),
//                      linear_2 on every text row (the caption projection).
// Profiling scopes (util/profile.h): adaln (the conditioning a modulation
// is made from: timestep and label embeddings), patch_embed,
// caption_projection.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class TimestepEmbedding {
 public:
  static constexpr int64_t kChannels = 256;  // Timesteps(num_channels=256)
  // Under `prefix` ("adaln_single.emb.timestep_embedder."), W = width.
  static TensorDecls tensors(const std::string& prefix, int64_t width);
  static TimestepEmbedding load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);

  // The sinusoids of `values` (diffusers' get_timestep_embedding with
  // flip_sin_to_cos and downscale_freq_shift `shift`), (len, 256) on place.
  static Tensor sinusoid(const std::vector<float>& values, float shift, const Placement& place);
  // (R, 256) sinusoids -> (R, W).
  Tensor operator()(const Tensor& sinusoid) const;

  Linear linear_1;  // (W, 256)
  Linear linear_2;  // (W, W)
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
  static PatchEmbed load(const io::WeightStore& weights, const std::string& prefix, int64_t patch,
                         const Placement& place);

  // (B, C, H, W) host images -> (B, N, C*p*p) patches on place.
  Tensor patches(const Tensor& images) const;
  // (B, P, C*p*p) rows of patches -> (B, P, D) tokens plus positions (P, D).
  Tensor operator()(const Tensor& patch_rows, const Tensor& positions) const;

 private:
  int64_t patch_ = 0;
  Placement place_;
  Tensor weight_;  // (D, C*p*p): the convolution as a linear
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
  Linear linear_1_;  // (D, in)
  Linear linear_2_;  // (D, D)
};

}  // namespace ditgen::models::nn
