// Element types of tensor storage and devices. CPU tensors hold any of the
// six: float32 (what the CPU ops compute in), bfloat16 and float16 (weights
// kept in their stored dtype, mmapped, and widened inside the GEMM), int32
// and int64 (index tensors read from files), int8 (W8A8 GEMM weights:
// ops/cpu/int8_matmul.h). CUDA tensors hold the three
// floating types, which the CUDA ops widen to float32 to compute (model.dtype,
// docs/design.md §3). Header-only and free of CUDA syntax: the tensor layer, the
// CUDA kernels and the CPU tests share it.
#pragma once
#include <cstddef>
#include <string>

namespace ditgen {

enum class Device { kCPU, kCUDA };
enum class DType { kF32, kBF16, kF16, kI32, kI64, kI8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kI8: return 1;
  }
  return 0;
}

// float32, bfloat16 or float16: the types the ops and the CUDA backend take.
constexpr bool is_floating(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kI8: return "int8";
  }
  return "?";
}

constexpr const char* device_name(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

}  // namespace ditgen
