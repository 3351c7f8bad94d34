#include "models/nn/final_layer.h"

#include <cstring>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

// `stored` (R, ...) with its rows reordered from (c, s)
// (channels c < C outer) to (s, c), a CPU copy in the stored dtype: row
// s * C + c of the result is stored row c * S + s.
Tensor channels_last_rows(const Tensor& stored, int64_t channels) {
  const int64_t rows = stored.dim(0), per_channel = rows / channels;
  Tensor out = Tensor::empty(stored.shape(), Device::kCPU, stored.dtype());
  const size_t row_bytes = stored.nbytes() / static_cast<size_t>(rows);
  const auto* src = static_cast<const char*>(stored.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t s = 0; s < per_channel; ++s)
      std::memcpy(dst + static_cast<size_t>(s * channels + c) * row_bytes,
                  src + static_cast<size_t>(c * per_channel + s) * row_bytes, row_bytes);
  return out;
}

}  // namespace

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
  if (names.patch_channels_first > 0) {
    const int64_t channels = names.patch_channels_first;
    const auto reorder = [channels](const Tensor& t) { return channels_last_rows(t, channels); };
    f.proj_out_ = {place.matrix(reorder(w.load(names.out + "weight"))), place.put(reorder(w.load(names.out + "bias"))),
                   LoraTerms::load(w, names.out + "weight", 0, -1, 0, -1, place, reorder)};
  } else {
    f.proj_out_ = Linear::load(w, names.out, place);
  }
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
