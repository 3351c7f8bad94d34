#include "models/nn/final_layer.h"

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

TensorDecls FinalLayer::tensors(const FinalLayerNames& names, int64_t dim, int64_t out) {
  TensorDecls t = names.by == FinalLayerNames::Modulation::kTable
                      ? ScaleShiftTable::tensors(names.modulation, 2, dim, names.table_leading_one)
                      : linear_tensors(names.modulation, 2 * dim, dim);
  append(t, linear_tensors(names.out, out, dim));
  return t;
}

FinalLayer FinalLayer::load(const io::WeightStore& w, const FinalLayerNames& names, const Placement& place,
                            float eps) {
  FinalLayer f;
  f.eps_ = eps;
  f.place_ = place;
  f.by_ = names.by;
  if (names.by == FinalLayerNames::Modulation::kTable)
    f.table_ = ScaleShiftTable::load(w, names.modulation, place);
  else
    f.modulation_ = Linear::load(w, names.modulation, place);
  f.proj_out_ = Linear::load(w, names.out, place);
  return f;
}

Tensor FinalLayer::shift_scale(const Tensor& conditioning) const {
  profile::ScopedTimer t("final_layer");
  return by_ == FinalLayerNames::Modulation::kTable ? table_.add_to_repeated(conditioning)
                                                    : modulation_(ops::silu(conditioning));
}

Tensor FinalLayer::operator()(const Tensor& hidden, const Tensor& shift_scale) const {
  profile::ScopedTimer t("final_layer");
  const int64_t d = hidden.dim(2);
  Tensor normed = place_.empty(hidden.shape());
  ops::layer_norm_modulate(hidden, shift_scale, 0, d, eps_, normed);
  return proj_out_(normed);
}

}  // namespace ditgen::models::nn
