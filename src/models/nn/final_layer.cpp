#include "models/nn/final_layer.h"

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

TensorDecls FinalLayer::linear_modulated_tensors(const std::string& modulation_prefix, const std::string& out_prefix,
                                                 int64_t dim, int64_t out) {
  TensorDecls t = linear_tensors(modulation_prefix, 2 * dim, dim);
  append(t, linear_tensors(out_prefix, out, dim));
  return t;
}

FinalLayer FinalLayer::load_linear_modulated(const io::WeightStore& w, const std::string& modulation_prefix,
                                             const std::string& out_prefix, const Placement& place) {
  FinalLayer f;
  f.place_ = place;
  f.modulation_ = Linear::load(w, modulation_prefix, place);
  f.proj_out_ = Linear::load(w, out_prefix, place);
  return f;
}

TensorDecls FinalLayer::table_modulated_tensors(const std::string& table_name, const std::string& out_prefix,
                                                int64_t dim, int64_t out) {
  TensorDecls t = ScaleShiftTable::tensors(table_name, 2, dim);
  append(t, linear_tensors(out_prefix, out, dim));
  return t;
}

FinalLayer FinalLayer::load_table_modulated(const io::WeightStore& w, const std::string& table_name,
                                            const std::string& out_prefix, const Placement& place) {
  FinalLayer f;
  f.place_ = place;
  f.from_table_ = true;
  f.table_ = ScaleShiftTable::load(w, table_name, place);
  f.proj_out_ = Linear::load(w, out_prefix, place);
  return f;
}

Tensor FinalLayer::shift_scale(const Tensor& conditioning) const {
  profile::ScopedTimer t("final_layer");
  return from_table_ ? table_.add_to_repeated(conditioning) : modulation_(ops::silu(conditioning));
}

Tensor FinalLayer::operator()(const Tensor& hidden, const Tensor& shift_scale) const {
  profile::ScopedTimer t("final_layer");
  const int64_t d = hidden.dim(2);
  Tensor normed = place_.empty(hidden.shape());
  ops::layer_norm_modulate(hidden, shift_scale, 0, d, kNormEps, normed);
  return proj_out_(normed);
}

}  // namespace ditgen::models::nn
