// The joint sequence's modules: a band split and joined with ops/rows.h,
// each kind of row normalised and gated by its own triple, the
// LayerNorm's affine folded into the modulation on the host.
#include "models/nn/joint_attention.h"

#include <algorithm>

#include "ops/rows.h"

namespace ditgen::models::nn {

JointRows JointRows::split(const Tensor& band, int64_t text_rows) {
  const int64_t rows = band.dim(1), pt = std::clamp<int64_t>(text_rows, 0, rows);
  return {ops::take_rows(band, 0, pt), ops::take_rows(band, pt, rows - pt)};
}

Tensor JointRows::joined() const { return ops::join_rows(text, video); }

Tensor JointModulation::normalize(const JointRows& rows) const {
  Tensor t = Tensor::empty(rows.text.shape(), rows.text.device(), rows.text.dtype());
  Tensor v = Tensor::empty(rows.video.shape(), rows.video.device(), rows.video.dtype());
  if (rows.text.dim(1) > 0) mod_.normalize(rows.text, kText, eps_, t);
  if (rows.video.dim(1) > 0) mod_.normalize(rows.video, kVideo, eps_, v);
  return ops::join_rows(t, v);
}

void JointModulation::add_gated(JointRows& rows, const Tensor& out) const {
  const int64_t pt = rows.text.dim(1), pv = rows.video.dim(1);
  if (pt > 0) mod_.add_gated(rows.text, ops::take_rows(out, 0, pt), kText);
  if (pv > 0) mod_.add_gated(rows.video, ops::take_rows(out, pt, pv), kVideo);
}

Tensor fold_norm_affine(const Tensor& mod, const LayerNorm& norm, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                        const Placement& place) {
  const Tensor& w = norm.weight;
  const Tensor& b = norm.bias;
  const int64_t dim = w.numel();
  Tensor m = mod.to(Device::kCPU, DType::kF32).clone();
  const int64_t rows = m.dim(0), width = m.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = m.data() + r * width;
    for (const auto& [shift, scale] : pairs)
      for (int64_t d = 0; d < dim; ++d) {
        const float s = row[scale * dim + d], t = row[shift * dim + d];
        row[scale * dim + d] = w[d] * (1.0f + s) - 1.0f;
        row[shift * dim + d] = b[d] * (1.0f + s) + t;
      }
  }
  return place.put(m);
}

TensorDecls JointNormZero::tensors(const std::string& prefix, int64_t dim, int64_t cond_dim) {
  TensorDecls t = AdaLnZero::tensors(prefix + "linear.", dim, kModulationChunks, cond_dim);
  append(t, LayerNorm::tensors(prefix + "norm.", dim));
  return t;
}

JointNormZero JointNormZero::load(const io::WeightStore& w, const std::string& prefix, int64_t dim, float eps,
                                  parallel::Communicator* tp, const Placement& place) {
  JointNormZero n;
  n.linear_ = AdaLnZero::load(w, prefix + "linear.", dim, tp, place);
  n.norm_ = LayerNorm::load(w, prefix + "norm.", dim, eps, Placement{});  // host float32: folded per forward
  n.place_ = place;
  n.eps_ = eps;
  return n;
}

JointModulation JointNormZero::operator()(const Tensor& emb) const {
  // Chunks: shift 0, scale 1, gate 2 (video); shift 3, scale 4, gate 5 (text).
  return {fold_norm_affine(linear_(emb), norm_, {{0, 1}, {3, 4}}, place_), norm_.weight.numel(), eps_};
}

}  // namespace ditgen::models::nn
