// The cuBLASLt side of Linear (gemm.cu): which epilogue a linear asks for and
// the key its heuristic choice is cached under, once per shape. Pure host
// code; tests/cuda_host checks the epilogue choice, equality and hashing.
//
// A linear y[M, N] (row stride ldy) = act(x[M, K] w[N, K]^T + bias) is, in
// cuBLASLt's column-major terms, D[N, M] = op_T(W) X with the bias along
// D's rows, so cuBLASLt's bias epilogues (a vector over rows, broadcast over
// columns) add it and CUBLASLT_EPILOGUE_GELU_BIAS (GELU, tanh
// approximation, after the bias: PyTorch's _addmm_activation) applies
// gelu_tanh on the output tile: one pass over y instead of three.
#pragma once
#include <cstdint>

#include "kernels/cuda/dtype.h"
#include "kernels/cuda/plan_cache.h"

namespace ditgen::cuda {

enum class GemmEpilogue : uint8_t { kNone, kBias, kGeluTanh, kGeluTanhBias };

constexpr GemmEpilogue gemm_epilogue(bool bias, bool gelu_tanh) {
  if (gelu_tanh) return bias ? GemmEpilogue::kGeluTanhBias : GemmEpilogue::kGeluTanh;
  return bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
}

constexpr bool epilogue_has_bias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kGeluTanhBias;
}

struct LtGemmKey {
  int device = 0;
  DType dtype = DType::kBF16;
  int64_t m = 0, n = 0, k = 0;        // y[m, n] = x[m, k] w[n, k]^T
  int64_t ldx = 0, ldw = 0, ldy = 0;  // row strides, elements
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  // address_alignment() of x, w, y and the bias (0 without one), capped at 256.
  uint32_t align_x = 0, align_w = 0, align_y = 0, align_bias = 0;
  bool tf32 = false;  // float32 GEMMs: TF32 allowed (device.h)

  bool operator==(const LtGemmKey&) const = default;

  uint64_t hash() const {
    return hash_fields(device, static_cast<int>(dtype), m, n, k, ldx, ldw, ldy, static_cast<int>(epilogue), align_x,
                       align_w, align_y, align_bias, tf32);
  }
};

}  // namespace ditgen::cuda
