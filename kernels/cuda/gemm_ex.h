// Internal to kernels/cuda/: the strided-batched GEMM of cuda_ops.h with a
// separate output type, for the math attention path (bf16/f16 Q·K^T into
// float32 scores). cuBLAS supports A/B bf16 or f16 with C float32 under
// CUBLAS_COMPUTE_32F. Host-only header.
#pragma once
#include <cstdint>

#include "kernels/cuda/dtype.h"

namespace ditgen::cuda {

// Row-major C_i[M,N] = alpha op(A_i) op(B_i) + beta C_i, A/B of ab_type, C of c_type.
void gemm_strided_batched_ex(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                             int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, float beta,
                             void* c, int64_t ldc, int64_t stride_c, int64_t batch, DType ab_type, DType c_type);

}  // namespace ditgen::cuda
