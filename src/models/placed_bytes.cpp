#include "models/placed_bytes.h"

namespace ditgen::models {

double block_matrix_bytes_per_element(const io::WeightStore& weights, const Placement& place) {
  double elements = 0, bytes = 0;
  for (const std::string& name : weights.names()) {
    if (!Placement::int8_eligible(name)) continue;
    const io::TensorInfo& info = weights.info(name);
    if (info.shape.size() != 2) continue;
    const double rows = static_cast<double>(info.shape[0]), n = rows * static_cast<double>(info.shape[1]);
    elements += n;
    const bool cpu = place.device == Device::kCPU;
    if (place.int8 && cpu)
      bytes += n + 4 * rows;  // int8 values, a float32 scale per output channel
    else if (info.ggml_type && info.type == io::StoredType::kF32 && cpu && info.ggml_type != math::GgmlType::kF32)
      bytes += static_cast<double>(info.end - info.begin);  // blocks, read in place
    else if (cpu && place.dtype == DType::kF32 && info.type == io::StoredType::kF16)
      bytes += 2 * n;  // widened inside the GEMM
    else
      bytes += static_cast<double>(dtype_size(place.dtype)) * n;
  }
  return elements > 0 ? bytes / elements : 0;
}

}  // namespace ditgen::models
