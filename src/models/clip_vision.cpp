// ClipVisionEncoder: loads tensor by tensor (each GEMM weight placed, its
// source pages released when that made a copy, before the next is read),
// and runs the images through the layers kImagesPerPass at a time. The
// stored names are written once here; the declarations and the load both
// follow them.
#include "models/clip_vision.h"

#include <algorithm>
#include <stdexcept>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

const std::string kPublishedRoot = "vision_model.";  // Wan-AI's and OpenAI's files
const std::string kClassEmbedding = "embeddings.class_embedding";  // also the naming's probe
const std::string kPatchEmbedding = "embeddings.patch_embedding.weight";
const std::string kPositionEmbedding = "embeddings.position_embedding.weight";
const std::string kPreNorm = "pre_layrnorm.";  // sic, as transformers names it
const std::string kLayers = "encoder.layers";

std::string layer(const std::string& root, int64_t i) { return root + kLayers + "." + std::to_string(i) + "."; }
std::string norm1(const std::string& root, int64_t i) { return layer(root, i) + "layer_norm1."; }
std::string norm2(const std::string& root, int64_t i) { return layer(root, i) + "layer_norm2."; }
std::string attention(const std::string& root, int64_t i) { return layer(root, i) + "self_attn."; }
std::string mlp(const std::string& root, int64_t i) { return layer(root, i) + "mlp."; }

// The patch conv (D, C, p, p) read as the GEMM weight (D, C*p*p) that
// ops::patchify's (c, i, j) order meets.
nn::TensorDecl patch_tensor(const ClipVisionConfig& c, const std::string& root) {
  const int64_t p = c.patch_size;
  return {root + kPatchEmbedding, {c.hidden_size, c.num_channels * p * p}, nn::TpSplit::kWhole, std::nullopt, {},
          {c.hidden_size, c.num_channels, p, p}};
}

}  // namespace

std::string ClipVisionEncoder::naming_root(const io::WeightStore& weights) {
  for (const std::string& root : {kPublishedRoot, std::string()})
    if (weights.contains(root + kClassEmbedding)) return root;
  return kPublishedRoot;  // neither: the check names the published tensor missing
}

nn::TensorDecls ClipVisionEncoder::stem_tensors(const ClipVisionConfig& c, const std::string& root) {
  nn::TensorDecls t = {{root + kClassEmbedding, {c.hidden_size}}, patch_tensor(c, root),
                       {root + kPositionEmbedding, {c.tokens(), c.hidden_size}}};
  nn::append(t, nn::LayerNorm::tensors(root + kPreNorm, c.hidden_size));
  return t;
}

nn::TensorDecls ClipVisionEncoder::layer_tensors(const ClipVisionConfig& c, const std::string& root, int64_t i) {
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  nn::TensorDecls t = nn::LayerNorm::tensors(norm1(root, i), D);
  for (const char* proj : {"q_proj.", "k_proj.", "v_proj.", "out_proj."})
    nn::append(t, nn::linear_tensors(attention(root, i) + proj, D, D));
  nn::append(t, nn::LayerNorm::tensors(norm2(root, i), D));
  nn::append(t, nn::linear_tensors(mlp(root, i) + "fc1.", F, D));
  nn::append(t, nn::linear_tensors(mlp(root, i) + "fc2.", D, F));
  return t;
}

void ClipVisionEncoder::check(const io::WeightStore& w, const ClipVisionConfig& c) {
  const std::string root = naming_root(w);
  nn::TensorDecls all = stem_tensors(c, root);
  for (int64_t i = 0; i < c.layers_run(); ++i) nn::append(all, layer_tensors(c, root, i));
  nn::check_tensors(w, all);
  // The last layer is not read, but one past it means the file is another
  // model than config.json describes.
  if (w.contains(norm1(root, c.num_layers) + "weight"))
    throw ModelError(w.dir() + ": holds more " + root + kLayers + " than num_hidden_layers = " +
                     std::to_string(c.num_layers) + " in config.json");
}

ClipVisionEncoder::ClipVisionEncoder(const ClipVisionConfig& cfg, const io::WeightStore& w, const Placement& place)
    : cfg_(cfg), place_(place) {
  const std::string root = naming_root(w);
  const nn::TensorDecls stem = stem_tensors(cfg, root);
  class_embedding_ = nn::load_as(w, stem[0], place, nn::Placed::kPut).reshape({1, 1, cfg.hidden_size});
  patch_weight_ = nn::load_as(w, stem[1], place, nn::Placed::kMatrix);
  positions_ = nn::load_as(w, stem[2], place, nn::Placed::kPut);
  pre_norm_ = nn::LayerNorm::load(w, root + kPreNorm, cfg.hidden_size, cfg.eps, place);
  layers_.resize(static_cast<size_t>(cfg.layers_run()));
  for (int64_t i = 0; i < cfg.layers_run(); ++i) {
    Layer& l = layers_[static_cast<size_t>(i)];
    l.norm1 = nn::LayerNorm::load(w, norm1(root, i), cfg.hidden_size, cfg.eps, place);
    l.q = nn::Linear::load(w, attention(root, i) + "q_proj.", place);
    l.k = nn::Linear::load(w, attention(root, i) + "k_proj.", place);
    l.v = nn::Linear::load(w, attention(root, i) + "v_proj.", place);
    l.out = nn::Linear::load(w, attention(root, i) + "out_proj.", place);
    l.norm2 = nn::LayerNorm::load(w, norm2(root, i), cfg.hidden_size, cfg.eps, place);
    l.fc1 = nn::Linear::load(w, mlp(root, i) + "fc1.", place);
    l.fc2 = nn::Linear::load(w, mlp(root, i) + "fc2.", place);
  }
}

Tensor ClipVisionEncoder::embed(const Tensor& pixels) const {
  profile::ScopedTimer t("clip.embed");
  const int64_t n = pixels.dim(0);
  const Tensor patches = ops::linear(ops::patchify(pixels, cfg_.patch_size), patch_weight_, nullptr);  // (n, T-1, D)
  Tensor x = ops::join_rows(ops::repeat_rows(class_embedding_, n), patches);                         // (n, T, D)
  ops::add_broadcast_(x, positions_);
  return pre_norm_(x);
}

void ClipVisionEncoder::run_layer(const Layer& l, int64_t n, Tensor& h) const {
  const int64_t D = cfg_.hidden_size, T = cfg_.tokens();
  Tensor x = l.norm1(h);  // (n, T, D)
  Tensor q, k, v;
  {
    profile::ScopedTimer t("clip.qkv_proj");
    q = l.q(x);
    k = l.k(x);
    v = l.v(x);
  }
  Tensor att = place_.empty({n, T, D});
  ops::AttentionArgs args =
      ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(att), n, cfg_.num_heads,
                          cfg_.head_dim());  // scale head_dim^-1/2, as CLIPAttention's
  args.follow_attention_mode = false;  // --attention is the transformer's
  args.compute = place_.dtype;
  {
    profile::ScopedTimer t("clip.attention");
    ops::attention(args);
  }
  {
    profile::ScopedTimer t("clip.out_proj");
    ops::add_(h, l.out(att));
  }
  x = l.norm2(h);
  Tensor hidden;
  {
    profile::ScopedTimer t("clip.mlp_in");
    if (cfg_.act == ClipActivation::kGeluTanh) {
      hidden = l.fc1(x, ops::Activation::kGeluTanh);
    } else {
      hidden = l.fc1(x);
      ops::gelu_(hidden);
    }
  }
  profile::ScopedTimer t("clip.mlp_out");
  ops::add_(h, l.fc2(hidden));
}

Tensor ClipVisionEncoder::encode(const Tensor& pixels) const {
  const int64_t C = cfg_.num_channels, S = cfg_.image_size;
  const bool one = pixels.ndim() == 3;
  if (one ? pixels.shape() != Shape{C, S, S} : pixels.ndim() != 4 || pixels.shape() != Shape{pixels.dim(0), C, S, S})
    throw std::invalid_argument("ClipVisionEncoder::encode: pixels " + shape_str(pixels.shape()) + ", expected (B, " +
                                std::to_string(C) + ", " + std::to_string(S) + ", " + std::to_string(S) + ")");
  const Tensor images = one ? pixels.reshape({1, C, S, S}) : pixels;
  const int64_t B = images.dim(0), T = cfg_.tokens(), D = cfg_.hidden_size;
  Tensor out = Tensor::empty({B, T, D});
  for (int64_t b0 = 0; b0 < B; b0 += kImagesPerPass) {
    const int64_t n = std::min(kImagesPerPass, B - b0);
    Tensor h = embed(images.slice0(b0, b0 + n).to(place_.device, place_.storage()));  // (n, T, D) residual stream
    for (const Layer& l : layers_) run_layer(l, n, h);
    out.slice0(b0, b0 + n).copy_from(h.to(Device::kCPU, DType::kF32));
  }
  return out;
}

}  // namespace ditgen::models
