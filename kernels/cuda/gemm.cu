// GEMM and Linear on the GPU through cuBLAS (cublasGemmEx and its strided-
// batched form). cuBLAS is column-major: a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so each call swaps the operands and
// the m/n sizes and keeps the transpose flags.
//
// Precision: the compute type is CUBLAS_COMPUTE_32F for every storage type
// (bf16/f16 inputs, float32 accumulation); float32 GEMMs become
// CUBLAS_COMPUTE_32F_FAST_TF32 only when TF32 is allowed (device.h's
// tf32_allowed(), which also sets the handle's math mode accordingly).
//
// The batched form takes a separate output type for the math attention
// path (gemm_ex.h). Linear's bias is a separate epilogue kernel over the output rows (one read
// and write of y) rather than a cublasLt epilogue: one library, any ldy.
#include <cublas_v2.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm_ex.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kI32:
    case DType::kI64: break;
  }
  throw std::invalid_argument(std::string("gemm: unsupported dtype ") + dtype_name(t));
}

cublasComputeType_t compute_type(DType t) {
  return t == DType::kF32 && tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// y[r, j] += bias[j] for rows of length n with row stride ldy.
template <class T>
__global__ void bias_rows_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t rows, int64_t n, int64_t ldy) {
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / n, j = i - r * n;
    T* p = y + r * ldy + j;
    *p = from_float<T>(to_float(*p) + to_float(bias[j]));
  }
}

}  // namespace


void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, float beta, void* c, int64_t ldc, DType dtype) {
  if (m == 0 || n == 0) return;
  const cudaDataType_t t = cuda_type(dtype);
  DITGEN_CUBLAS_CHECK(cublasGemmEx(cublas(), op(trans_b), op(trans_a), checked_int(n, "gemm n"),
                                   checked_int(m, "gemm m"), checked_int(k, "gemm k"), &alpha, b, t,
                                   checked_int(ldb, "gemm ldb"), a, t, checked_int(lda, "gemm lda"), &beta, c, t,
                                   checked_int(ldc, "gemm ldc"), compute_type(dtype), CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched_ex(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                             int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, float beta,
                             void* c, int64_t ldc, int64_t stride_c, int64_t batch, DType ab_type, DType c_type) {
  if (m == 0 || n == 0 || batch == 0) return;
  const cudaDataType_t t = cuda_type(ab_type);
  DITGEN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas(), op(trans_b), op(trans_a), checked_int(n, "gemm n"), checked_int(m, "gemm m"),
      checked_int(k, "gemm k"), &alpha, b, t, checked_int(ldb, "gemm ldb"), stride_b, a, t,
      checked_int(lda, "gemm lda"), stride_a, &beta, c, cuda_type(c_type), checked_int(ldc, "gemm ldc"), stride_c,
      checked_int(batch, "gemm batch"), compute_type(ab_type), CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                          int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, float beta,
                          void* c, int64_t ldc, int64_t stride_c, int64_t batch, DType dtype) {
  gemm_strided_batched_ex(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                          batch, dtype, dtype);
}

void linear(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k, int64_t ldy,
            DType dtype) {
  gemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, ldy, dtype);
  if (!bias || m == 0 || n == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_rows_kernel<T><<<grid_for(m * n), kThreads, 0, stream()>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                                    m, n, ldy);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
