// The CLIP vision encoder (transformers' CLIPVisionModel) up to the
// penultimate layer's hidden states, what Wan 2.1 image-to-video conditions
// on (diffusers' WanImageToVideoPipeline.encode_image: hidden_states[-2]),
// on the op front end so it runs on either device:
//
//   x = [class_embedding; patch_embedding(pixels)] + position_embedding
//                     patches of p x p pixels: a conv of stride p without
//                     bias, run as patchify + one GEMM      (B, T, D)
//   h = pre_layrnorm(x)
//   per layer (the first num_layers - 1 of them):
//     h += out_proj(attention(q_proj(n), k_proj(n), v_proj(n)))  n = layer_norm1(h)
//     h += fc2(act(fc1(n)))                                      n = layer_norm2(h)
//   out = h                                      (no post_layernorm: [-2] is before it)
//
// The attention is non-causal with no mask (every image has all T tokens),
// scaled by head_dim^-1/2. A composition of models/nn/'s LayerNorm and
// Linear with ops::attention; the activation is the exact GELU (ops::gelu_)
// or the tanh one fused into fc1.
//
// Weights by name, either naming: the published checkpoints (Wan-AI's
// image_encoder/model.safetensors, OpenAI's) hold "vision_model.<name>",
// transformers 5's save_pretrained writes "<name>"; which one a store holds
// is told by its class embedding, and every tensor is then read under it
// (a store with neither is reported missing under the published name).
// Layer norms, the embeddings and the residual stream in storage() (float32
// on the CPU); the GEMM weights as Placement says (on the CPU float32, or
// bfloat16 with float32 sums).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/clip_vision_spec.h"
#include "models/nn/linear.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models {

class ClipVisionEncoder {
 public:
  // Images run through the layers together, at most this many at once (the
  // activations of a pass grow with it; the output does not).
  static constexpr int64_t kImagesPerPass = 8;

  // The naming `weights` holds: "vision_model." or "" (see above).
  static std::string naming_root(const io::WeightStore& weights);
  // What it holds once (embeddings, pre_layrnorm) and layer i's tensors,
  // whole as stored, under `root`.
  static nn::TensorDecls stem_tensors(const ClipVisionConfig& cfg, const std::string& root);
  static nn::TensorDecls layer_tensors(const ClipVisionConfig& cfg, const std::string& root, int64_t layer);
  // Checks every tensor the encoder reads (and refuses a layer at index
  // num_layers or beyond) before anything is read.
  static void check(const io::WeightStore& weights, const ClipVisionConfig& cfg);

  // `weights` must have passed check().
  ClipVisionEncoder(const ClipVisionConfig& cfg, const io::WeightStore& weights, const Placement& place);

  // pixels: host float32 (B, C, S, S) or one image (C, S, S), S =
  // image_size (io/clip_image_processor.h's output) -> (B, T, D) host
  // float32, hidden_states[-2]. std::invalid_argument for another shape.
  Tensor encode(const Tensor& pixels) const;
  const ClipVisionConfig& config() const { return cfg_; }

 private:
  struct Layer {
    nn::LayerNorm norm1;                  // layer_norm1: (D)
    nn::Linear q, k, v;                   // self_attn.{q,k,v}_proj: (D, D), (D)
    nn::Linear out;                       // self_attn.out_proj: (D, D), (D)
    nn::LayerNorm norm2;                  // layer_norm2: (D)
    nn::Linear fc1;                       // mlp.fc1: (F, D), (F)
    nn::Linear fc2;                       // mlp.fc2: (D, F), (D)
  };
  // pixels (n, C, S, S) on the device -> (n, T, D): embeddings + positions, pre-normed.
  Tensor embed(const Tensor& pixels) const;
  void run_layer(const Layer& l, int64_t n, Tensor& h) const;

  ClipVisionConfig cfg_;
  Placement place_;
  Tensor class_embedding_;  // (1, 1, D)
  Tensor patch_weight_;     // (D, C*p*p): the conv's (D, C, p, p), (c, i, j) order as ops::patchify's
  Tensor positions_;        // (T, D)
  nn::LayerNorm pre_norm_;  // pre_layrnorm: (D)
  std::vector<Layer> layers_;  // num_layers - 1
};

}  // namespace ditgen::models
