// The norms of nn/norm.h: each loads the tensors it declares and runs one
// op (ops::group_norm, layer_norm, rms_norm, rms_norm_channels).
#include "models/nn/norm.h"

#include "ops/ops.h"

namespace ditgen::models::nn {

namespace {

// weight (and bias) of `dim`, the affine every norm here holds.
TensorDecls affine_tensors(const std::string& prefix, int64_t dim, bool bias) {
  TensorDecls t = {{prefix + "weight", {dim}}};
  if (bias) t.push_back({prefix + "bias", {dim}});
  return t;
}

}  // namespace

TensorDecls GroupNorm::tensors(const std::string& prefix, int64_t channels) {
  return affine_tensors(prefix, channels, true);
}

GroupNorm GroupNorm::load(const io::WeightStore& w, const std::string& prefix, int64_t channels, int64_t groups,
                          float eps, const Placement& place) {
  const TensorDecls t = tensors(prefix, channels);
  GroupNorm n;
  n.weight = load_as(w, t[0], place, Placed::kPut);
  n.bias = load_as(w, t[1], place, Placed::kPut);
  n.groups_ = groups;
  n.eps_ = eps;
  return n;
}

Tensor GroupNorm::operator()(const Tensor& x, bool silu) const {
  return ops::group_norm(x, groups_, weight, bias, eps_, silu);
}

TensorDecls LayerNorm::tensors(const std::string& prefix, int64_t dim) { return affine_tensors(prefix, dim, true); }

LayerNorm LayerNorm::load(const io::WeightStore& w, const std::string& prefix, int64_t dim, float eps,
                          const Placement& place) {
  const TensorDecls t = tensors(prefix, dim);
  LayerNorm n;
  n.weight = load_as(w, t[0], place, Placed::kPut);
  n.bias = load_as(w, t[1], place, Placed::kPut);
  n.eps_ = eps;
  return n;
}

Tensor LayerNorm::operator()(const Tensor& x) const { return ops::layer_norm(x, &weight, &bias, eps_); }

TensorDecls RmsNorm::tensors(const std::string& prefix, int64_t dim) { return affine_tensors(prefix, dim, false); }

RmsNorm RmsNorm::load(const io::WeightStore& w, const std::string& prefix, int64_t dim, float eps,
                      const Placement& place) {
  RmsNorm n;
  n.weight = load_as(w, tensors(prefix, dim)[0], place, Placed::kPut);
  n.eps_ = eps;
  return n;
}

Tensor RmsNorm::operator()(const Tensor& x) const { return ops::rms_norm(x, weight, eps_); }

TensorDecls ChannelRmsNorm::tensors(const std::string& prefix, int64_t channels, int trailing_ones) {
  Shape shape = {channels};
  shape.resize(static_cast<size_t>(1 + trailing_ones), 1);
  return {{prefix + "gamma", shape}};
}

ChannelRmsNorm ChannelRmsNorm::load(const io::WeightStore& w, const std::string& prefix, int64_t channels,
                                    int trailing_ones, const Placement& place) {
  return {load_as(w, tensors(prefix, channels, trailing_ones)[0], place, Placed::kPut)};
}

Tensor ChannelRmsNorm::operator()(const Tensor& x, bool silu) const {
  return ops::rms_norm_channels(x, gamma, nullptr, silu);
}

}  // namespace ditgen::models::nn
