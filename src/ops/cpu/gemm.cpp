// GEMM and Linear on the CPU through OpenBLAS (its OpenMP build, so BLAS and
// ditgen's own loops share one thread pool and never oversubscribe cores).
// Called from inside an OpenMP parallel region (attention tiles), the OpenMP
// OpenBLAS runs single-threaded, which is what the tiled kernels want.
//
// Weights may be bfloat16 or float16 (mmapped in their stored dtype); the
// arithmetic stays float32 (bf16 compute is a later step). Such a weight is
// widened a block of rows at a time into a reused thread-local float32
// scratch of about 4 MB and multiplied block by block with sgemm / sgemv, so
// no float32 copy of a whole weight ever exists. A float32 weight takes
// exactly the single sgemm / sgemv call it always did.
//
// Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) does not recognise recent Xeons
// (Sapphire/Emerald Rapids) and falls back to its "Prescott" SSE3 kernels,
// 4x slower. Before main, if the user has not chosen OPENBLAS_CORETYPE and
// the CPU has AVX-512 (AVX2) but OpenBLAS picked an older core, it is
// re-initialised with the SkylakeX (Haswell) kernels, which these CPUs run.
//
// OpenBLAS works in 128 MiB buffers from a pool it fills when the library
// loads (one per thread of its pool), and takes another when more calls
// run at once than it has buffers; if that mmap fails (an address-space
// limit, RLIMIT_AS) it retries forever: a hang, not an error. So
// set_num_threads has every pool thread run one small GEMM at the same
// time, as the attention tiles do, which fills the pool to what a run
// needs before the run allocates anything; a later out-of-memory then
// fails in ditgen's own allocation, which names the tensor and the stage.
// (A limit too small for the buffers taken at load hangs inside OpenBLAS's
// constructor, before main: README, Bad input.)
#include <cblas.h>
#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "tensor/half.h"

extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);
char* openblas_get_corename(void);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
}

namespace ditgen::ops {

namespace {
int g_threads = 1;

// The OpenBLAS core this CPU should use when detection fell short, or null.
const char* better_blas_core(const std::string& detected) {
#if defined(__x86_64__)
  const bool has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool detected_avx512 = detected == "SkylakeX" || detected == "Cooperlake" || detected == "SapphireRapids";
  const bool detected_avx2 = detected_avx512 || detected == "Haswell" || detected == "Zen";
  if (has_avx512 && !detected_avx512) return "SkylakeX";
  if (has_avx2 && !detected_avx2) return "Haswell";
#else
  (void)detected;
#endif
  return nullptr;
}

const bool g_blas_core_checked = [] {
  if (std::getenv("OPENBLAS_CORETYPE")) return true;  // the user's choice stands
  const char* core = better_blas_core(openblas_get_corename());
  if (core) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
  }
  return true;
}();
// Every pool thread runs one small GEMM, so each takes its OpenBLAS buffer now.
// 128^3: past OpenBLAS's small-matrix path, which takes no buffer.
void take_blas_buffers(int threads) {
  constexpr int n = 128;
  const std::vector<float> a(n * n, 0.0f), b(n * n, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> c(n * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  }
}

}  // namespace

const char* blas_core() { return openblas_get_corename(); }

void set_num_threads(int n) {
  g_threads = std::max(1, n);
  omp_set_num_threads(g_threads);
  openblas_set_num_threads(g_threads);
  take_blas_buffers(g_threads);
  // Flush denormals to zero on every pool thread (and this one): vectorised
  // activations evaluate both sides of their clamps, and a denormal result
  // costs a ~100-cycle microcode assist per lane (GELU ran 10x slower).
#if defined(__SSE__)
#pragma omp parallel num_threads(g_threads)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

int num_threads() { return g_threads; }

const char* blas_threading() {
  switch (openblas_get_parallel()) {
    case 0: return "serial";
    case 1: return "pthread";
    case 2: return "openmp";
    default: return "unknown";
  }
}

}  // namespace ditgen::ops

namespace ditgen::ops::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

namespace {

// Elements of float32 scratch per block of widened weight rows: big enough
// that each sgemm call is efficient, small enough to stay in L2/L3.
constexpr int64_t kScratchElements = int64_t{1} << 20;

// This thread's scratch of at least n floats (grown, never shrunk).
float* scratch(int64_t n) {
  thread_local std::unique_ptr<float[]> buf;
  thread_local int64_t size = 0;
  if (n > size) {
    buf.reset(new float[static_cast<size_t>(n)]);
    size = n;
  }
  return buf.get();
}

// Rows a block holds: whole rows of `row` elements within the scratch
// (at least one).
int64_t block_rows(int64_t row) { return std::max<int64_t>(1, kScratchElements / std::max<int64_t>(row, 1)); }

// dst[i] = float(src[i]) for a 16-bit array (a contiguous run of weight rows).
void widen(const void* src, DType dtype, int64_t count, float* dst) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  const bool parallel = count >= 65536 && !omp_in_parallel();
  if (dtype == DType::kBF16) {
#pragma omp parallel for simd schedule(static) if (parallel)
    for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(h[i]);
  } else {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < count; ++i) dst[i] = f16_to_f32(h[i]);
  }
}

// `rows` rows of `cols` elements, `ld` apart in src, packed into dst.
void widen_rows(const char* src, DType dtype, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  if (ld == cols) return widen(src, dtype, rows * cols, dst);
  for (int64_t r = 0; r < rows; ++r) widen(src + r * ld * dtype_size(dtype), dtype, cols, dst + r * cols);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (b_dtype == DType::kF32)
    return gemm(trans_a, trans_b, m, n, k, alpha, a, lda, static_cast<const float*>(b), ldb, beta, c, ldc);
  if (m == 0 || n == 0) return;
  const size_t esize = dtype_size(b_dtype);
  const char* bytes = static_cast<const char*>(b);
  if (trans_b) {
    // b is [n, k]: a block of its rows is a block of c's columns.
    const int64_t rows = block_rows(k);
    float* w = scratch(std::min(rows, n) * k);
    for (int64_t n0 = 0; n0 < n; n0 += rows) {
      const int64_t nb = std::min(rows, n - n0);
      widen_rows(bytes + n0 * ldb * esize, b_dtype, nb, k, ldb, w);
      gemm(trans_a, true, m, nb, k, alpha, a, lda, w, k, beta, c + n0, ldc);
    }
    return;
  }
  // b is [k, n]: a block of its rows is a slice of the sum over k, so the
  // blocks accumulate into c (beta applies once, with the first).
  if (k == 0) return gemm(trans_a, false, m, n, k, alpha, a, lda, scratch(n), n, beta, c, ldc);
  const int64_t rows = block_rows(n);
  float* w = scratch(std::min(rows, k) * n);
  for (int64_t k0 = 0; k0 < k; k0 += rows) {
    const int64_t kb = std::min(rows, k - k0);
    widen_rows(bytes + k0 * ldb * esize, b_dtype, kb, n, ldb, w);
    gemm(trans_a, false, m, n, kb, alpha, trans_a ? a + k0 * lda : a + k0, lda, w, n, k0 == 0 ? beta : 1.0f, c, ldc);
  }
}

void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, float* y, int64_t ldy) {
  if (w.ndim() != 2) throw std::invalid_argument("linear: weight must be 2-D, got " + shape_str(w.shape()));
  const int64_t n = w.dim(0), k = w.dim(1);
  if (x.ndim() < 1 || x.dim(-1) != k)
    throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                shape_str(w.shape()));
  if (bias && bias->numel() != n) throw std::invalid_argument("linear: bias " + shape_str(bias->shape()));
  const int64_t m = x.numel() / k;
  if (w.dtype() != DType::kF32 && m == 1) {
    // GEMV on a 16-bit weight: each block of widened rows gives its outputs.
    const int64_t rows = block_rows(k);
    float* wf = scratch(std::min(rows, n) * k);
    const size_t row_bytes = static_cast<size_t>(k) * w.element_size();
    for (int64_t n0 = 0; n0 < n; n0 += rows) {
      const int64_t nb = std::min(rows, n - n0);
      widen(static_cast<const char*>(w.raw()) + n0 * row_bytes, w.dtype(), nb * k, wf);
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(nb), static_cast<blasint>(k), 1.0f, wf,
                  static_cast<blasint>(k), x.data(), 1, 0.0f, y + n0, 1);
    }
  } else if (w.dtype() != DType::kF32) {
    gemm(false, true, m, n, k, 1.0f, x.data(), k, w.raw(), w.dtype(), k, 0.0f, y, ldy);
  } else if (m == 1) {
    // GEMV: sgemv is markedly faster than a 1-row sgemm for the adaLN linears.
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, w.data(),
                static_cast<blasint>(k), x.data(), 1, 0.0f, y, 1);
  } else {
    gemm(false, true, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y, ldy);
  }
  if (bias) {
    const float* bv = bias->data();
#pragma omp parallel for if (m * n > 32768)
    for (int64_t i = 0; i < m; ++i) {
      float* row = y + i * ldy;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] += bv[j];
    }
  }
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  Shape out_shape = x.shape();
  out_shape.back() = w.dim(0);
  Tensor y = Tensor::empty(out_shape);
  linear_into(x, w, bias, y.data(), w.dim(0));
  return y;
}

}  // namespace ditgen::ops::cpu
