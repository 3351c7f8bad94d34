// WanImageEmbedding's forward as diffusers 0.42.1 runs it: positions added
// to the image tokens, norm1, net.0.proj, GELU (erf), net.2, norm2.
#include "models/wan_image_embedding.h"

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models {

nn::TensorDecls WanImageEmbedding::tensors(const std::string& prefix, int64_t image_dim, int64_t dim,
                                           int64_t pos_len) {
  nn::TensorDecls t;
  if (pos_len > 0) t.push_back({prefix + "pos_embed", {1, pos_len, image_dim}});
  for (const char* part : {"weight", "bias"}) t.push_back({prefix + "norm1." + part, {image_dim}});
  nn::append(t, nn::linear_tensors(prefix + "ff.net.0.proj.", image_dim, image_dim));
  nn::append(t, nn::linear_tensors(prefix + "ff.net.2.", dim, image_dim));
  for (const char* part : {"weight", "bias"}) t.push_back({prefix + "norm2." + part, {dim}});
  return t;
}

WanImageEmbedding WanImageEmbedding::load(const io::WeightStore& w, const std::string& prefix, bool positions,
                                          const Placement& place) {
  WanImageEmbedding e;
  e.place_ = place;
  if (positions) e.pos_ = place.put(w.load(prefix + "pos_embed"));
  e.norm1_w_ = place.put(w.load(prefix + "norm1.weight"));
  e.norm1_b_ = place.put(w.load(prefix + "norm1.bias"));
  e.proj_in_ = nn::Linear::load(w, prefix + "ff.net.0.proj.", place);
  e.proj_out_ = nn::Linear::load(w, prefix + "ff.net.2.", place);
  e.norm2_w_ = place.put(w.load(prefix + "norm2.weight"));
  e.norm2_b_ = place.put(w.load(prefix + "norm2.bias"));
  return e;
}

Tensor WanImageEmbedding::operator()(const Tensor& image) const {
  profile::ScopedTimer t("caption_projection");
  Tensor x = place_.put(image).clone();  // (B, M, image_dim), the caller's left as it was
  if (pos_.defined()) ops::add_broadcast_(x, pos_);
  Tensor hidden = proj_in_(ops::layer_norm(x, &norm1_w_, &norm1_b_, kEps));
  ops::gelu_(hidden);
  return ops::layer_norm(proj_out_(hidden), &norm2_w_, &norm2_b_, kEps);
}

}  // namespace ditgen::models
