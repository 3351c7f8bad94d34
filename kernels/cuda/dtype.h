// Storage element types of the CUDA ops. Tensors on the device hold float32,
// bfloat16 or float16 values behind void pointers plus one of these tags; the
// kernels are templated on the matching C++ type inside the .cu files and
// always compute in float32. No CUDA includes: host code (the attention path
// choice, its CPU test) uses it without the toolkit.
#pragma once
#include <cstddef>

namespace ditgen::cuda {

enum class DType { kF32, kBF16, kF16 };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
  }
  return "?";
}

}  // namespace ditgen::cuda
