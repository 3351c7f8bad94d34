#include "models/nn/embeddings.h"

#include <cmath>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

void sincos_1d(double pos, int64_t dim, float* out) {
  const int64_t half = dim / 2;
  for (int64_t k = 0; k < half; ++k) {
    const double omega = 1.0 / std::pow(10000.0, static_cast<double>(k) / (static_cast<double>(dim) / 2.0));
    out[k] = static_cast<float>(std::sin(pos * omega));
    out[half + k] = static_cast<float>(std::cos(pos * omega));
  }
}

TensorDecls TwoLinears::tensors(const std::string& prefix, int64_t in, int64_t width) {
  TensorDecls t = linear_tensors(prefix + "linear_1.", width, in);
  append(t, linear_tensors(prefix + "linear_2.", width, width));
  return t;
}

TwoLinears TwoLinears::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  return {Linear::load(w, prefix + "linear_1.", place), Linear::load(w, prefix + "linear_2.", place)};
}

Tensor TwoLinears::operator()(const Tensor& x, Act act) const {
  if (act == Act::kGeluTanh) return linear_2(linear_1(x, ops::Activation::kGeluTanh));
  Tensor h = linear_1(x);
  ops::silu_(h);
  return linear_2(h);
}

TensorDecls TimestepEmbedding::tensors(const std::string& prefix, int64_t width, int64_t channels) {
  return TwoLinears::tensors(prefix, channels, width);
}

TimestepEmbedding TimestepEmbedding::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  TimestepEmbedding e;
  e.mlp = TwoLinears::load(w, prefix, place);
  e.channels_ = w.info(prefix + "linear_1.weight").shape.at(1);
  return e;
}

Tensor TimestepEmbedding::sinusoid(const std::vector<float>& values, float shift, const Placement& place,
                                   int64_t channels) {
  return place.put(ops::timestep_embedding(values, channels, true, shift));  // tiny, made on the host
}

Tensor TimestepEmbedding::operator()(const Tensor& sinusoid) const {
  profile::ScopedTimer t("adaln");
  return mlp(sinusoid, TwoLinears::Act::kSilu);
}

TensorDecls LabelEmbedding::tensors(const std::string& name, int64_t classes, int64_t width) {
  return {{name, {classes + 1, width}}};
}

LabelEmbedding LabelEmbedding::load(const io::WeightStore& w, const std::string& name, const Placement& place) {
  return {place.put(w.load(name))};
}

Tensor LabelEmbedding::operator()(const std::vector<int64_t>& labels) const {
  profile::ScopedTimer t("adaln");
  return ops::gather_rows(table, labels);
}

TensorDecls PatchEmbed::tensors(const std::string& prefix, int64_t dim, int64_t in_channels, int64_t patch) {
  return {{prefix + "weight", {dim, in_channels, patch, patch}}, {prefix + "bias", {dim}}};
}

TensorDecls PatchEmbed::tensors3d(const std::string& prefix, int64_t dim, int64_t in_channels,
                                  std::array<int64_t, 3> patch) {
  return {{prefix + "weight", {dim, in_channels, patch[0], patch[1], patch[2]}}, {prefix + "bias", {dim}}};
}

PatchEmbed PatchEmbed::load(const io::WeightStore& w, const std::string& prefix, int64_t patch,
                            const Placement& place) {
  PatchEmbed e = load3d(w, prefix, {1, patch, patch}, place);
  e.video_ = false;
  return e;
}

PatchEmbed PatchEmbed::load3d(const io::WeightStore& w, const std::string& prefix, std::array<int64_t, 3> patch,
                              const Placement& place) {
  PatchEmbed e;
  e.patch_ = patch;
  e.video_ = true;
  e.place_ = place;
  const Tensor conv = load_matrix(w, prefix + "weight", place);  // (D, C, p, p) or (D, C, pt, ph, pw)
  e.weight_ = conv.reshape({conv.dim(0), conv.numel() / conv.dim(0)});
  e.bias_ = place.put(w.load(prefix + "bias"));
  return e;
}

Tensor PatchEmbed::patches(const Tensor& images) const {
  profile::ScopedTimer t("patch_embed");
  return video_ ? ops::patchify3d(place_.put(images), patch_) : ops::patchify(place_.put(images), patch_[1]);
}

Tensor PatchEmbed::operator()(const Tensor& patch_rows, const Tensor& positions) const {
  profile::ScopedTimer t("patch_embed");  // a stride-p conv as patchify + linear, plus positions
  Tensor tokens = ops::linear(patch_rows, weight_, &bias_);
  ops::add_broadcast_(tokens, positions);
  return tokens;
}

Tensor PatchEmbed::operator()(const Tensor& patch_rows) const {
  profile::ScopedTimer t("patch_embed");  // a stride-patch conv as patchify + linear
  return ops::linear(patch_rows, weight_, &bias_);
}

TensorDecls TextProjection::tensors(const std::string& prefix, int64_t in, int64_t dim) {
  return TwoLinears::tensors(prefix, in, dim);
}

TextProjection TextProjection::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  TextProjection p;
  p.place_ = place;
  p.mlp_ = TwoLinears::load(w, prefix, place);
  return p;
}

Tensor TextProjection::operator()(const Tensor& text) const {
  profile::ScopedTimer t("caption_projection");
  return mlp_(place_.put(text), TwoLinears::Act::kGeluTanh);
}

}  // namespace ditgen::models::nn
