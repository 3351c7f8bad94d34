// GEMM and Linear on the CPU. The arithmetic is the weight's dtype (docs/design.md
// §2, README "CPU compute dtype"):
//   float32 weight   float32 GEMM: oneDNN matmul (onednn_matmul.h), or
//                    OpenBLAS sgemv for a single row of output;
//   bfloat16 weight  bfloat16 GEMM: the input rounded to bfloat16 (nearest
//                    even), products exact, sums in float32, float32 out:
//                    oneDNN's bf16 matmul where it has a kernel for this CPU
//                    (up to 8 rows: small_gemm_bf16.h, memory-bound), else
//                    the same arithmetic emulated (the rounded input against
//                    the widened weight in float32); a weight packed at load
//                    (pack_gemm_weight: oneDNN's blocked layout, what the
//                    transformers' weights are where it runs natively) always
//                    goes to oneDNN, whatever the rows;
//   float16 weight   float32 GEMM on the weight widened exactly (CPUs have no
//                    float16 arithmetic): a block of rows at a time into a
//                    reused thread-local float32 scratch of about 4 MB, so no
//                    float32 copy of a whole weight ever exists.
// The bfloat16 input is converted a block of rows at a time into a reused
// thread-local scratch (at most kRoundedElements), so memory does not grow
// with the number of tokens, and nothing is allocated once the first
// denoising step has sized the scratch.
//
// oneDNN and OpenBLAS are both OpenMP builds, so BLAS, oneDNN and ditgen's
// own loops share one thread pool and never oversubscribe cores. Called from
// inside an OpenMP parallel region, both run single-threaded.
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
#include <type_traits>
#include <vector>

#include "kernels/math/activations.h"
#include "kernels/math/ggml_blocks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/bf16_round.h"
#include "ops/cpu/int8_matmul.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/small_gemm_bf16.h"
#include "ops/cpu/thread_scratch.h"
#include "tensor/convert.h"
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

namespace {

Bf16Hooks g_bf16_hooks;

// Elements of float32 scratch per block of widened weight rows: big enough
// that each GEMM call is efficient, small enough to stay in L2/L3.
constexpr int64_t kScratchElements = int64_t{1} << 20;
// Elements of the input rounded to bfloat16 per block of rows (32 MB as
// bfloat16): at least a few hundred rows for every K a DiT has, where the
// bf16 matmul runs at full speed (420+ GFLOP/s from M = 512).
constexpr int64_t kRoundedElements = int64_t{1} << 24;

float* widen_scratch(int64_t n) { return thread_scratch<float, kWidenedWeight>(n); }

// Rows a block holds: whole rows of `row` elements within `budget` elements
// (at least one).
int64_t block_rows(int64_t row, int64_t budget = kScratchElements) {
  return std::max<int64_t>(1, budget / std::max<int64_t>(row, 1));
}

bool parallel_pass(int64_t count) { return count >= 65536 && !omp_in_parallel(); }

// dst[i] = float(src[i]) for a 16-bit array (a contiguous run of weight rows).
void widen(const void* src, DType dtype, int64_t count, float* dst) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  if (dtype == DType::kBF16) {
#pragma omp parallel for simd schedule(static) if (parallel_pass(count))
    for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(h[i]);
  } else {
#pragma omp parallel for schedule(static) if (parallel_pass(count))
    for (int64_t i = 0; i < count; ++i) dst[i] = f16_to_f32(h[i]);
  }
}

// `rows` rows of `cols` elements, `ld` apart in src, packed into dst.
void widen_rows(const char* src, DType dtype, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  if (ld == cols) return widen(src, dtype, rows * cols, dst);
  for (int64_t r = 0; r < rows; ++r) widen(src + r * ld * dtype_size(dtype), dtype, cols, dst + r * cols);
}

// Rows r0..r0+rows of op(a) (m x k, a [m, k] or [k, m] with lda) packed
// into dst [rows, k], each element rounded to the nearest bfloat16 (even on
// ties), as bfloat16 bits (Out = uint16_t) or as the float32 of that value.
template <class Out>
void round_rows(const float* a, bool trans_a, int64_t lda, int64_t r0, int64_t rows, int64_t k, Out* dst) {
#pragma omp parallel for schedule(static) if (parallel_pass(rows * k))
  for (int64_t r = 0; r < rows; ++r) {
    Out* out = dst + r * k;
    if constexpr (std::is_same_v<Out, uint16_t>) {
      if (!trans_a) {  // the common case: a contiguous row, vectorised
        round_to_bf16(a + (r0 + r) * lda, k, out);
        continue;
      }
    }
    for (int64_t e = 0; e < k; ++e) {
      const uint16_t h = f32_to_bf16(trans_a ? a[e * lda + r0 + r] : a[(r0 + r) * lda + e]);
      if constexpr (std::is_same_v<Out, uint16_t>) out[e] = h;
      else out[e] = bf16_to_f32(h);
    }
  }
}

// c rows += bias, then the activation: what oneDNN fuses, for the paths that
// do not run through it.
void finish_rows(float* c, int64_t m, int64_t n, int64_t ldc, const float* bias, Activation act) {
  if (!bias && act == Activation::kNone) return;
#pragma omp parallel for if (m * n > 32768 && !omp_in_parallel())
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
    if (act == Activation::kGeluTanh) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] = math::gelu_tanh(row[j]);
    }
  }
}

// c = beta * c (k == 0: the product is empty), then bias and activation.
void scale_rows(float* c, int64_t m, int64_t n, int64_t ldc, float beta, const float* bias, Activation act) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  finish_rows(c, m, n, ldc, bias, act);
}

MatmulCall call_of(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, int64_t lda,
                   int64_t ldb, float beta, int64_t ldc, DType dtype, const float* bias, Activation act) {
  MatmulCall call;
  call.m = m;
  call.n = n;
  call.k = k;
  call.trans_a = trans_a;
  call.trans_b = trans_b;
  call.lda = lda;
  call.ldb = ldb;
  call.ldc = ldc;
  call.dtype = dtype;
  call.alpha = alpha;
  call.beta = beta;
  call.bias = bias != nullptr;
  call.act = act;
  return call;
}

// oneDNN's matmul with the bias and the activation fused, except a bias
// under alpha != 1 (oneDNN adds its bias to the unscaled product): then both
// come after.
void fused_matmul(MatmulCall call, const void* a, const void* b, const float* bias, float* c) {
  if (bias && call.alpha != 1.0f) {
    const Activation act = call.act;
    call.bias = false;
    call.act = Activation::kNone;
    onednn_matmul(call, a, b, nullptr, c);
    return finish_rows(c, call.m, call.n, call.ldc, bias, act);
  }
  onednn_matmul(call, a, b, bias, c);
}

// float32 a and b.
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias, Activation act) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_rows(c, m, n, ldc, beta, bias, act);
  if (m == 1) {
    // One row: OpenBLAS's sgemv beats a one-row matmul (the adaLN linears of
    // a single image: 1.4 ms against 1.7 for 1152 -> 6912, 15 us against 35
    // for 128 -> 768). c = alpha op(b)^T a + beta c, a strided by lda when
    // transposed.
    cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, static_cast<blasint>(trans_b ? n : k),
                static_cast<blasint>(trans_b ? k : n), alpha, b, static_cast<blasint>(ldb), a,
                static_cast<blasint>(trans_a ? lda : 1), beta, c, 1);
    return finish_rows(c, 1, n, ldc, bias, act);
  }
  fused_matmul(call_of(trans_a, trans_b, m, n, k, alpha, lda, ldb, beta, ldc, DType::kF32, bias, act), a, b, bias,
               c);
}

// float32 a against a 16-bit b widened a block at a time (exact), float32
// arithmetic: float16 weights, and the emulated bfloat16 GEMM (whose a is
// already rounded).
void gemm_widened(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc,
                  const float* bias, Activation act) {
  const size_t esize = dtype_size(b_dtype);
  const char* bytes = static_cast<const char*>(b);
  if (trans_b) {
    // b is [n, k]: a block of its rows is a block of c's columns.
    const int64_t rows = block_rows(k);
    float* w = widen_scratch(std::min(rows, n) * k);
    for (int64_t n0 = 0; n0 < n; n0 += rows) {
      const int64_t nb = std::min(rows, n - n0);
      widen_rows(bytes + n0 * ldb * esize, b_dtype, nb, k, ldb, w);
      gemm_f32(trans_a, true, m, nb, k, alpha, a, lda, w, k, beta, c + n0, ldc, nullptr, Activation::kNone);
    }
  } else {
    // b is [k, n]: a block of its rows is a slice of the sum over k, so the
    // blocks accumulate into c (beta applies once, with the first).
    const int64_t rows = block_rows(n);
    float* w = widen_scratch(std::min(rows, k) * n);
    for (int64_t k0 = 0; k0 < k; k0 += rows) {
      const int64_t kb = std::min(rows, k - k0);
      widen_rows(bytes + k0 * ldb * esize, b_dtype, kb, n, ldb, w);
      gemm_f32(trans_a, false, m, n, kb, alpha, trans_a ? a + k0 * lda : a + k0, lda, w, n, k0 == 0 ? beta : 1.0f, c,
               ldc, nullptr, Activation::kNone);
    }
  }
  finish_rows(c, m, n, ldc, bias, act);
}

// float32 a, bfloat16 b: a's rows rounded to bfloat16 a block at a time.
// A packed b (trans_b, ldb = k) always goes to oneDNN, whatever the rows
// (packing happened only where it runs natively).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const void* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias, Activation act,
               bool packed) {
  const bool native = packed || (onednn_fast(DType::kBF16) && !g_bf16_hooks.emulate);
  if (!packed && native && trans_b && m <= kSmallGemmRows && small_gemm_bf16_available()) {
    // A few rows (adaLN, embedders): memory-bound, the weight streamed once.
    uint16_t* ab = thread_scratch<uint16_t, kRoundedInput>(m * k);
    round_rows(a, trans_a, lda, 0, m, k, ab);
    small_gemm_bf16(m, n, k, alpha, ab, k, static_cast<const uint16_t*>(b), ldb, beta, c, ldc);
    return finish_rows(c, m, n, ldc, bias, act);
  }
  const int64_t budget = g_bf16_hooks.gemm_block_elements > 0 ? g_bf16_hooks.gemm_block_elements : kRoundedElements;
  const int64_t rows = block_rows(k, budget);
  for (int64_t m0 = 0; m0 < m; m0 += rows) {
    const int64_t mb = std::min(rows, m - m0);
    float* cb = c + m0 * ldc;
    if (native) {
      uint16_t* ab = thread_scratch<uint16_t, kRoundedInput>(std::min(rows, m) * k);
      round_rows(a, trans_a, lda, m0, mb, k, ab);
      MatmulCall call = call_of(false, trans_b, mb, n, k, alpha, k, ldb, beta, ldc, DType::kBF16, bias, act);
      call.packed_b = packed;
      fused_matmul(call, ab, b, bias, cb);
    } else {
      float* af = thread_scratch<float, kRoundedInputF32>(std::min(rows, m) * k);
      round_rows(a, trans_a, lda, m0, mb, k, af);
      gemm_widened(false, trans_b, mb, n, k, alpha, af, k, b, DType::kBF16, ldb, beta, cb, ldc, bias, act);
    }
  }
}

// float32 a against a weight b [n, k] in a ggml block format (GGUF's
// Q8_0, Q4_K, ...): a band of b's rows dequantized at a time into a reused
// scratch, float32, or rounded to bfloat16 for a bfloat16 GEMM (as
// diffusers' GGUF layers cast the dequantized weight to their compute
// dtype), each band a GEMM into its columns of c; a rounded once for all
// bands. No copy of the whole weight in float is ever made.
void gemm_blocks(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const void* b, uint32_t block_type,
                 DType arithmetic, float* c, int64_t ldc, const float* bias, Activation act) {
  const math::GgmlTypeTraits* traits = math::find_ggml_type(block_type);
  if (!traits || !traits->dequantized || k % traits->block_size != 0)
    throw std::invalid_argument("gemm: a weight of ggml type " + std::to_string(block_type) + " with rows of " +
                                std::to_string(k));
  const int64_t blocks = k / traits->block_size;
  const size_t row_bytes = static_cast<size_t>(blocks) * static_cast<size_t>(traits->type_size);
  const auto* bytes = static_cast<const uint8_t*>(b);
  const auto type = static_cast<math::GgmlType>(block_type);
  const int64_t rows = std::min(n, block_rows(k));
  float* w = widen_scratch(rows * k);
  const bool bf16 = arithmetic == DType::kBF16;
  const bool native = bf16 && onednn_fast(DType::kBF16) && !g_bf16_hooks.emulate;
  // The input, rounded to bfloat16 once (as bits for oneDNN's bf16 matmul,
  // or as float32 values for the emulated one).
  uint16_t* ab = native ? thread_scratch<uint16_t, kRoundedInput>(m * k) : nullptr;
  float* af = bf16 && !native ? thread_scratch<float, kRoundedInputF32>(m * k) : nullptr;
  if (ab) round_rows(a, false, lda, 0, m, k, ab);
  if (af) round_rows(a, false, lda, 0, m, k, af);
  uint16_t* wb = native ? thread_scratch<uint16_t, kBlockBandBf16>(rows * k) : nullptr;
  for (int64_t n0 = 0; n0 < n; n0 += rows) {
    const int64_t nb = std::min(rows, n - n0);
#pragma omp parallel for schedule(static) if (parallel_pass(nb * k))
    for (int64_t r = 0; r < nb; ++r) {
      float* out = w + r * k;
      math::dequantize_blocks(type, bytes + static_cast<size_t>(n0 + r) * row_bytes, blocks, out);
      if (wb) round_to_bf16(out, k, wb + r * k);
      else if (bf16)
        for (int64_t e = 0; e < k; ++e) out[e] = bf16_to_f32(f32_to_bf16(out[e]));
    }
    const float* band_bias = bias ? bias + n0 : nullptr;
    if (native)
      fused_matmul(call_of(false, true, m, nb, k, 1.0f, k, k, 0.0f, ldc, DType::kBF16, band_bias, act), ab, wb,
                   band_bias, c + n0);
    else
      gemm_f32(false, true, m, nb, k, 1.0f, af ? af : a, af ? k : lda, w, k, 0.0f, c + n0, ldc, band_bias, act);
  }
}

}  // namespace

void set_bf16_hooks(const Bf16Hooks& hooks) { g_bf16_hooks = hooks; }
const Bf16Hooks& bf16_hooks() { return g_bf16_hooks; }

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr, Activation::kNone);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias,
          Activation act, Layout b_layout) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_rows(c, m, n, ldc, beta, bias, act);
  if (b_layout == Layout::kInt8Packed) {
    if (!trans_b || ldb != k || trans_a || alpha != 1.0f || beta != 0.0f)
      throw std::invalid_argument("gemm: an int8 weight is the b of a linear (trans_b, ldb = k, alpha 1, beta 0)");
    return int8_linear(a, m, k, lda, b, n, bias, act, c, ldc);
  }
  if (b_layout == Layout::kGemmPacked) {
    if (b_dtype != DType::kBF16 || !trans_b || ldb != k)
      throw std::invalid_argument("gemm: a packed weight is the bfloat16 b of a trans_b GEMM with ldb = k");
    return gemm_bf16(trans_a, true, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, act, true);
  }
  switch (b_dtype) {
    case DType::kF32:
      return gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, static_cast<const float*>(b), ldb, beta, c, ldc, bias,
                      act);
    case DType::kBF16:
      return gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, act, false);
    case DType::kF16:
      return gemm_widened(trans_a, trans_b, m, n, k, alpha, a, lda, b, b_dtype, ldb, beta, c, ldc, bias, act);
    default:
      throw std::invalid_argument(std::string("gemm: a ") + dtype_name(b_dtype) + " weight");
  }
}

void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, float* y, int64_t ldy, Activation act) {
  if (w.ndim() != 2) throw std::invalid_argument("linear: weight must be 2-D, got " + shape_str(w.shape()));
  const int64_t n = w.dim(0), k = w.dim(1);
  if (x.ndim() < 1 || x.dim(-1) != k)
    throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                shape_str(w.shape()));
  if (bias && bias->numel() != n) throw std::invalid_argument("linear: bias " + shape_str(bias->shape()));
  const int64_t m = x.numel() / k;
  if (w.layout() == Layout::kBlockQuantized)
    return gemm_blocks(m, n, k, x.data(), k, w.raw(), w.block_type(), w.dtype(), y, ldy, bias ? bias->data() : nullptr,
                       act);
  gemm(false, true, m, n, k, 1.0f, x.data(), k, w.raw(), w.dtype(), k, 0.0f, y, ldy, bias ? bias->data() : nullptr,
       act, w.layout());
}

Tensor pack_gemm_weight(const Tensor& w) {
  if (!w.is_cpu() || w.dtype() != DType::kBF16 || w.layout() != Layout::kRowMajor || w.ndim() != 2 ||
      g_bf16_hooks.emulate || !onednn_packs_weight(w.dim(0), w.dim(1)))
    return w;
  Tensor packed = Tensor::empty(w.shape(), Device::kCPU, DType::kBF16);
  onednn_pack_weight(w.dim(0), w.dim(1), w.raw(), packed.raw());
  return packed.with_layout(Layout::kGemmPacked);
}

namespace {

// Rows [r0, r0 + rows) of a block-quantized (n, k) weight, dequantized into
// dst (rows x k float32).
void dequantize_rows(const Tensor& w, int64_t r0, int64_t rows, float* dst) {
  const math::GgmlTypeTraits* traits = math::find_ggml_type(w.block_type());
  const int64_t k = w.dim(1);
  if (!traits || !traits->dequantized || k % traits->block_size != 0)
    throw std::invalid_argument("dequantize: a weight of ggml type " + std::to_string(w.block_type()) +
                                " with rows of " + std::to_string(k));
  const int64_t blocks = k / traits->block_size;
  const size_t row_bytes = static_cast<size_t>(blocks) * static_cast<size_t>(traits->type_size);
  const auto* bytes = static_cast<const uint8_t*>(w.raw());
#pragma omp parallel for schedule(static) if (parallel_pass(rows * k))
  for (int64_t r = 0; r < rows; ++r)
    math::dequantize_blocks(traits->type, bytes + static_cast<size_t>(r0 + r) * row_bytes, blocks, dst + r * k);
}

}  // namespace

Tensor dequantize_gemm_weight(const Tensor& w) {
  Tensor out = Tensor::empty(w.shape());
  dequantize_rows(w, 0, w.dim(0), out.data());
  return out;
}

Tensor quantize_gemm_weight(const Tensor& w) {
  const bool blocks = w.layout() == Layout::kBlockQuantized;
  if (w.ndim() != 2 || !(w.layout() == Layout::kRowMajor || blocks) || !is_floating(w.dtype()))
    throw std::invalid_argument("quantize_gemm_weight: a row-major floating [N, K] weight, not " + shape_str(w.shape()));
  const int64_t n = w.dim(0), k = w.dim(1);
  // Rows quantized a band at a time from their float32 widening, so no
  // float32 copy of the whole weight exists; the dense int8 values (n x k
  // bytes) live until they are packed.
  std::vector<int8_t> values(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n));
  const int64_t band = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(k, 1));
  std::vector<float> rows(static_cast<size_t>(std::min(band, n) * k));
  for (int64_t r0 = 0; r0 < n; r0 += band) {
    const int64_t rb = std::min(band, n - r0);
    if (blocks) dequantize_rows(w, r0, rb, rows.data());
    else convert_host(w.raw_at(r0 * k), w.dtype(), rows.data(), DType::kF32, rb * k);
    quantize_rows_s8(rows.data(), rb, k, k, values.data() + r0 * k, scales.data() + r0);
  }
  Tensor packed = Tensor::packed(w.shape(), DType::kI8, Layout::kInt8Packed, packed_weight_bytes_s8(n, k));
  pack_weight_s8(n, k, values.data(), scales.data(), packed.raw());
  return packed;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act) {
  Shape out_shape = x.shape();
  out_shape.back() = w.dim(0);
  Tensor y = Tensor::empty(out_shape);
  linear_into(x, w, bias, y.data(), w.dim(0), act);
  return y;
}

}  // namespace ditgen::ops::cpu
