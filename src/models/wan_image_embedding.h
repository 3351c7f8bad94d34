// Wan's image embedder (diffusers' WanImageEmbedding, the original release's
// img_emb): the CLIP image encoder's tokens (B, M, image_dim) -> (B, M, D),
// the context the image-to-video blocks' added keys and values read:
//   [+ pos_embed]   first-last-frame models (pos_embed_seq_len = M = both
//                   images' 257 tokens as one sequence): a learned
//                   (1, M, image_dim) table added first
//   norm1           LayerNorm with affine, eps 1e-5 (FP32LayerNorm's default)
//   ff              net.0.proj (image_dim -> image_dim), exact GELU,
//                   net.2 (image_dim -> D) (FeedForward, mult 1, "gelu")
//   norm2           LayerNorm with affine, eps 1e-5
// Held whole on every rank (the image tokens are context: every rank
// attends to all of them). Profiling scope (util/profile.h):
// caption_projection, as the text's.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models {

class WanImageEmbedding {
 public:
  // Under `prefix` ("condition_embedder.image_embedder."): image_dim wide
  // tokens to `dim`; the position table when pos_len > 0.
  static nn::TensorDecls tensors(const std::string& prefix, int64_t image_dim, int64_t dim, int64_t pos_len);
  static WanImageEmbedding load(const io::WeightStore& weights, const std::string& prefix, bool positions,
                                const Placement& place);
  // (B, M, image_dim) host image tokens -> (B, M, D) on place (M = pos_len with positions).
  Tensor operator()(const Tensor& image) const;

 private:
  static constexpr float kEps = 1e-5f;
  Placement place_;
  Tensor pos_;                  // (1, M, image_dim): first-last-frame models only
  Tensor norm1_w_, norm1_b_;    // (image_dim), (image_dim)
  nn::Linear proj_in_;          // ff.net.0.proj: (image_dim, image_dim)
  nn::Linear proj_out_;         // ff.net.2: (D, image_dim)
  Tensor norm2_w_, norm2_b_;    // (D), (D)
};

}  // namespace ditgen::models
