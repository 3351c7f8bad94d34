// Element types of tensor storage and devices. CPU tensors are float32 (the
// CPU backend computes in float32 throughout); CUDA tensors may also hold
// bfloat16 or float16, which the CUDA ops widen to float32 to compute
// (model.dtype, DESIGN.md §3). Header-only and free of CUDA syntax: the
// tensor layer, the CUDA kernels and the CPU tests share it.
#pragma once
#include <cstddef>
#include <string>

namespace ditgen {

enum class Device { kCPU, kCUDA };
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

constexpr const char* device_name(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

}  // namespace ditgen
