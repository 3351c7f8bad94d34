// Products of a few rows against a bfloat16 weight: y[m, n] = alpha *
// x[m, k] · w[n, k]^T + beta * y for m <= kSmallGemmRows. These are the
// adaLN modulation linears (one row per image: 2 for a CFG pair) and the
// timestep / caption embedders: memory-bound, every weight byte read once
// for a handful of dot products. oneDNN's matmul streamed DiT-XL/2's 446 MB
// of bf16 adaLN weights at 13 GB/s (M = 2); this kernel reads each weight
// row once for all m rows, with AVX512-BF16 dot products along k, and the
// threads split n.
#pragma once
#include <cstdint>

namespace ditgen::ops::cpu {

constexpr int64_t kSmallGemmRows = 8;

// Whether this build has the kernel (compiled with AVX512-BF16).
bool small_gemm_bf16_available();

// x: m rows of k bfloat16 values (ldx apart), w: n rows of k bfloat16 values
// (ldw apart), y float32 (ldy apart); 1 <= m <= kSmallGemmRows. beta == 0
// never reads y.
void small_gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* x, int64_t ldx, const uint16_t* w,
                     int64_t ldw, float beta, float* y, int64_t ldy);

}  // namespace ditgen::ops::cpu
