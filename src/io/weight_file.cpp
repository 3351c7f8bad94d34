// WeightFile's format-independent parts: element type names and float32 loads.
#include "io/weight_file.h"

namespace ditgen::io {

std::string element_type_name(const TensorInfo& info) {
  if (info.ggml_type) return math::ggml_traits(*info.ggml_type).name;
  return stored_type_name(info.type);
}

Tensor WeightFile::load_f32(const std::string& name) const {
  Tensor t = load(name);
  return t.dtype() == DType::kF32 ? t : t.to(DType::kF32);
}

Tensor WeightFile::load_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end) const {
  Tensor t = load_rows(name, row_begin, row_end);
  return t.dtype() == DType::kF32 ? t : t.to(DType::kF32);
}

}  // namespace ditgen::io
