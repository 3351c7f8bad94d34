// GEMM and Linear on the GPU through cuBLAS (cublasGemmEx and its strided-
// batched form) and cuBLASLt (Linear with its epilogues). cuBLAS is
// column-major: a row-major C = op(A) op(B) is the column-major C^T =
// op(B)^T op(A)^T, so each call swaps the operands and the m/n sizes and
// keeps the transpose flags.
//
// Precision: the compute type is CUBLAS_COMPUTE_32F for every storage type
// (bf16/f16 inputs, float32 accumulation); float32 GEMMs become
// CUBLAS_COMPUTE_32F_FAST_TF32 only when TF32 is allowed (device.h's
// tf32_allowed(), which also sets the handle's math mode accordingly).
//
// Linear (y = act(x w^T + bias)) goes through cuBLASLt with the bias and
// GELU-tanh + bias epilogues (gemm_lt_key.h): the heuristic's first choice
// for the shape, operand alignments and epilogue is cached once per
// LtGemmKey (PlanCache), the workspace is one block of the caching
// allocator. Where cuBLASLt has no algorithm (or DITGEN_CUBLASLT=0 switches
// it off, for A/B timings), cublasGemmEx plus the separate bias and GELU
// kernels run, as before.
//
// The batched form takes a separate output type for the math attention
// path (gemm_ex.h).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm_ex.h"
#include "kernels/cuda/gemm_lt_key.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kI32:
    case DType::kI64:
    case DType::kI8: break;
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

namespace {

#define DITGEN_CUBLASLT_CHECK(call) DITGEN_CUBLAS_CHECK(call)

bool cublaslt_switched_off() {
  static const bool off = env_switched_off("DITGEN_CUBLASLT");
  return off;
}

struct LtRuntime {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The cuBLASLt handle and its workspace (from the caching allocator, never
// returned: like the cuBLAS handle's, it lives as long as the process).
LtRuntime& lt() {
  static LtRuntime* const r = [] {
    auto* rt = new LtRuntime;
    DITGEN_CUBLASLT_CHECK(cublasLtCreate(&rt->handle));
    rt->workspace_bytes = current_device_info().major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
    rt->workspace = device_alloc(rt->workspace_bytes);
    return rt;
  }();
  return *r;
}

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kGeluTanh: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::kGeluTanhBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Column-major D[n, m] = op_T(W[k, n]) X[k, m] (+ bias over D's rows), the
// heuristic's first algorithm for it; null when cuBLASLt has none.
std::shared_ptr<LtPlan> build_lt_plan(const LtGemmKey& key, size_t workspace_bytes) {
  auto p = std::make_shared<LtPlan>();
  const cudaDataType_t t = cuda_type(key.dtype);
  const cublasComputeType_t ct =
      key.dtype == DType::kF32 && key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
  const cublasOperation_t trans_w = CUBLAS_OP_T, trans_x = CUBLAS_OP_N;
  DITGEN_CUBLASLT_CHECK(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_w, sizeof trans_w));
  DITGEN_CUBLASLT_CHECK(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_x, sizeof trans_x));
  const cublasLtEpilogue_t epi = lt_epilogue(key.epilogue);
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (epilogue_has_bias(key.epilogue))
    DITGEN_CUBLASLT_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t));
  DITGEN_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p->w, t, static_cast<uint64_t>(key.k),
                                                   static_cast<uint64_t>(key.n), key.ldw));
  DITGEN_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p->x, t, static_cast<uint64_t>(key.k),
                                                   static_cast<uint64_t>(key.m), key.ldx));
  DITGEN_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p->y, t, static_cast<uint64_t>(key.n),
                                                   static_cast<uint64_t>(key.m), key.ldy));
  cublasLtMatmulPreference_t pref = nullptr;
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = workspace_bytes;
  DITGEN_CUBLASLT_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The heuristic assumes 256-byte aligned operands unless told otherwise.
  const uint32_t align_a = key.align_w, align_b = key.align_x, align_c = key.align_y;
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                             &align_a, sizeof align_a));
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                             &align_b, sizeof align_b));
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                             &align_c, sizeof align_c));
  DITGEN_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                             &align_c, sizeof align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt().handle, p->op, p->w, p->x, p->y, p->y, pref, 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return nullptr;
  p->algo = result.algo;
  p->workspace = result.workspaceSize;
  return p;
}

PlanCache<LtGemmKey, LtPlan>& lt_plans() {
  static auto* const cache = new PlanCache<LtGemmKey, LtPlan>;
  return *cache;
}

// The linear through cuBLASLt; false when it has no algorithm for it.
bool linear_lt(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k,
               int64_t ldy, DType dtype, bool gelu_tanh) {
  if (cublaslt_switched_off() || k == 0) return false;
  LtGemmKey key;
  key.device = current_device();
  key.dtype = dtype;
  key.m = m;
  key.n = n;
  key.k = k;
  key.ldx = k;
  key.ldw = k;
  key.ldy = ldy;
  key.epilogue = gemm_epilogue(bias != nullptr, gelu_tanh);
  key.align_x = address_alignment(reinterpret_cast<uintptr_t>(x));
  key.align_w = address_alignment(reinterpret_cast<uintptr_t>(w));
  key.align_y = address_alignment(reinterpret_cast<uintptr_t>(y));
  key.align_bias = bias ? address_alignment(reinterpret_cast<uintptr_t>(bias)) : 0;
  key.tf32 = dtype == DType::kF32 && tf32_allowed();
  // A bias vector cuBLASLt would read with vector loads: keep it 16-byte aligned.
  if (bias && key.align_bias < 16) return false;
  LtRuntime& r = lt();
  std::shared_ptr<LtPlan> plan = lt_plans().get(key, [&] { return build_lt_plan(key, r.workspace_bytes); });
  if (!plan) return false;
  // The bias pointer is the call's, set on the shared descriptor under the
  // lock (one stream: calls are ordered anyway).
  std::lock_guard<std::mutex> lock(r.mutex);
  if (bias)
    DITGEN_CUBLASLT_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float alpha = 1.0f, beta = 0.0f;
  DITGEN_CUBLASLT_CHECK(cublasLtMatmul(r.handle, plan->op, &alpha, w, plan->w, x, plan->x, &beta, y, plan->y, y,
                                       plan->y, &plan->algo, r.workspace, plan->workspace, stream()));
  return true;
}

}  // namespace

void linear(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k, int64_t ldy,
            DType dtype, bool gelu_tanh) {
  if (m == 0 || n == 0) return;
  if (gelu_tanh && ldy != n) throw std::invalid_argument("linear: GELU-tanh needs a contiguous output (ldy == n)");
  if (linear_lt(x, w, bias, y, m, n, k, ldy, dtype, gelu_tanh)) return;
  linear_unfused(x, w, bias, y, m, n, k, ldy, dtype, gelu_tanh);
}

void linear_unfused(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k,
                    int64_t ldy, DType dtype, bool gelu_tanh) {
  if (m == 0 || n == 0) return;
  gemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, ldy, dtype);
  if (bias) {
    dispatch_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      bias_rows_kernel<T><<<grid_for(m * n), kThreads, 0, stream()>>>(static_cast<T*>(y),
                                                                      static_cast<const T*>(bias), m, n, ldy);
      DITGEN_CUDA_CHECK_LAUNCH();
    });
  }
  if (gelu_tanh) {
    if (ldy != n) throw std::invalid_argument("linear: GELU-tanh needs a contiguous output (ldy == n)");
    cuda::gelu_tanh(y, y, m * n, dtype);
  }
}

LinearPlanStats linear_plan_stats() {
  const auto& c = lt_plans();
  return {c.size(), c.builds(), c.hits()};
}

}  // namespace ditgen::cuda
