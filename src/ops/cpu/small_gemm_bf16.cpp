// small_gemm_bf16.h: a block of R weight rows at a time against all M input
// rows, M x R accumulators of 16 float32 lanes, 32 k-elements per step
// (vdpbf16ps: pairs of bf16 products summed into each lane), a masked load
// for the tail of k; the lanes are summed once per output at the end.
#include "ops/cpu/small_gemm_bf16.h"

#include <immintrin.h>
#include <omp.h>

#include <stdexcept>
#include <string>

#include "ops/cpu/bf16_dot.h"

namespace ditgen::ops::cpu {

#if defined(__AVX512BF16__)

namespace {

// The sum of v's 16 lanes, in _mm512_reduce_add_ps's order (halves, then
// quarters, then pairs), so results are unchanged. That intrinsic itself is
// not used: GCC 12's header builds it on _mm256_undefined_pd(), whose
// self-initialised variable makes every instantiation print
// -Wuninitialized / -Wmaybe-uninitialized (a false positive, GCC PR 105593).
// (_mm512_castps512_ps256 too). The zero-masked extracts give the same
// lanes with nothing undefined.
inline float sum_of_lanes(__m512 v) {
  const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1));
  const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 0));
  const __m256 halves = _mm256_add_ps(high, low);
  const __m128 quarters = _mm_add_ps(_mm256_extractf128_ps(halves, 1), _mm256_castps256_ps128(halves));
  const __m128 swapped = _mm_shuffle_ps(quarters, quarters, _MM_SHUFFLE(1, 0, 3, 2));  // lanes 2, 3, 0, 1
  const __m128 pairs = _mm_add_ps(quarters, swapped);
  return _mm_cvtss_f32(pairs) + _mm_cvtss_f32(_mm_shuffle_ps(pairs, pairs, 1));
}

// Rows [n0, n0 + R) of w against the M rows of x.
template <int M, int R>
void block(int64_t n0, int64_t k, float alpha, const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw,
           float beta, float* y, int64_t ldy) {
  __m512 acc[M][R];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  for (int64_t e = 0; e < k; e += 32) {
    const __mmask32 mask = k - e >= 32 ? ~__mmask32(0) : __mmask32((1u << (k - e)) - 1);
    __m512i wr[R];
    for (int r = 0; r < R; ++r) wr[r] = _mm512_maskz_loadu_epi16(mask, w + (n0 + r) * ldw + e);
    for (int i = 0; i < M; ++i) {
      const __m512i xi = _mm512_maskz_loadu_epi16(mask, x + i * ldx + e);
      for (int r = 0; r < R; ++r) acc[i][r] = dot_bf16_pairs(acc[i][r], xi, wr[r]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) {
      float& out = y[i * ldy + n0 + r];
      const float v = alpha * sum_of_lanes(acc[i][r]);
      out = beta == 0.0f ? v : v + beta * out;
    }
}

template <int M>
void rows(int64_t n, int64_t k, float alpha, const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float beta,
          float* y, int64_t ldy) {
  constexpr int R = M <= 4 ? 4 : 2;  // M x R accumulators + R weight registers fit the 32 zmm
  const int64_t blocks = n / R;
  // Threads split the rows (each weight byte is read by one thread); small
  // products stay on one.
#pragma omp parallel for schedule(static) if (n * k >= (1 << 16) && !omp_in_parallel())
  for (int64_t b = 0; b < blocks; ++b) block<M, R>(b * R, k, alpha, x, ldx, w, ldw, beta, y, ldy);
  for (int64_t n0 = blocks * R; n0 < n; ++n0) block<M, 1>(n0, k, alpha, x, ldx, w, ldw, beta, y, ldy);
}

}  // namespace

bool small_gemm_bf16_available() { return true; }

void small_gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* x, int64_t ldx, const uint16_t* w,
                     int64_t ldw, float beta, float* y, int64_t ldy) {
  switch (m) {
    case 1: return rows<1>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 2: return rows<2>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 3: return rows<3>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 4: return rows<4>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 5: return rows<5>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 6: return rows<6>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 7: return rows<7>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    case 8: return rows<8>(n, k, alpha, x, ldx, w, ldw, beta, y, ldy);
    default: throw std::invalid_argument("small_gemm_bf16: " + std::to_string(m) + " rows");
  }
}

#else

bool small_gemm_bf16_available() { return false; }

void small_gemm_bf16(int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*, int64_t, float,
                     float*, int64_t) {
  throw std::logic_error("small_gemm_bf16: built without AVX512-BF16");
}

#endif

}  // namespace ditgen::ops::cpu
