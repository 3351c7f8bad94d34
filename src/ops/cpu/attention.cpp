// Attention on the CPU: flash-attention style tiling with an online softmax,
// O(tile) memory per thread instead of O(n^2), and register-blocked
// micro-kernels (GCC vector extensions: 16-wide with AVX-512, 8-wide
// otherwise) instead of many small BLAS calls, whose per-call overhead made
// attention several times slower than the projections around it.
//
// Work items are (batch, head, 64-query tile). Scores are computed transposed,
// S^T = K Q^T, so that key rows are read straight from the strided K
// projection (only the small query tile is transposed) and the softmax runs
// along rows of S^T with the 64 queries as the vector lanes. Keys are walked
// in chunks of 256 with a running max / sum per query (online softmax); V
// rows are copied into whole-vector rows for the P V kernel. The softmax
// recurrence and the log-sum-exp merge are kernels/math/softmax.h's, shared
// with the CUDA kernels. With per-sample key counts (kv_lens) a work item
// simply walks fewer keys: the same loop, so attention over the first
// kv_lens[b] keys gives the bits of attention over those keys alone. An
// additive score bias (AttentionArgs::bias, T5's relative position bias) is
// added to each chunk's S^T tile between the score micro-kernel and the
// online softmax, for the tile's real queries only; without one that loop is
// skipped and the rest is unchanged.
//
// bfloat16 compute (AttentionArgs::compute): the scaled queries, the keys,
// the values and the probabilities are rounded to bfloat16 and multiplied
// exactly, with float32 sums; scores, the softmax and the output stay
// float32. With AVX512-BF16 the two micro-kernels run on bf16 pairs
// (vdpbf16ps: two products per lane per instruction, half the bytes):
// queries, probabilities and values are packed as pairs along the summed
// index (keys come as rows, whose consecutive elements already are pairs;
// bf16_dot.h).
// Without it the same arithmetic is emulated: the operands rounded into the
// float32 tiles and the float32 kernels run on them.
// Where oneDNN multiplies bfloat16 with AMX, bfloat16 attention runs on its
// matmuls instead (attention_onednn.cpp, same numerics); the choice is made
// once here, at the top of cpu::attention.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/math/softmax.h"
#include "ops/cpu/attention_onednn.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/bf16_round.h"
#include "ops/cpu/cpu_ops.h"
#include "tensor/half.h"

namespace ditgen::ops::cpu {

namespace {

#if defined(__AVX512F__)
constexpr int kVec = 16;
#else
constexpr int kVec = 8;
#endif
typedef float vfloat __attribute__((vector_size(kVec * sizeof(float))));
typedef float vfloat_unaligned __attribute__((vector_size(kVec * sizeof(float)), aligned(4)));

inline vfloat load(const float* p) { return *reinterpret_cast<const vfloat_unaligned*>(p); }
inline void store(float* p, vfloat v) { *reinterpret_cast<vfloat_unaligned*>(p) = v; }
inline vfloat splat(float x) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(x);
#elif defined(__AVX__)
  return _mm256_set1_ps(x);
#else
  return vfloat{} + x;
#endif
}

constexpr int64_t kQueryTile = 64;                // queries per work item: the vector lanes of S^T
constexpr int64_t kKeyTile = 256;                 // keys per online-softmax chunk
constexpr int kKeyRows = 8;                       // S^T rows (keys) per score micro-tile
constexpr int kQueryVecs = kVec == 16 ? 2 : 1;    // query vectors per score micro-tile
constexpr int kOutRows = kVec == 16 ? 4 : 2;      // query rows per P V micro-tile
constexpr int64_t kBiasBlock = 8;                 // keys per block of the bias add: 2 KB of S^T, L1-resident
constexpr int kMaxOutVecs = 6;                    // output vectors per P V micro-tile
static_assert(kQueryTile % (kQueryVecs * kVec) == 0 && kQueryTile % kOutRows == 0);

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The micro-kernels' arithmetic on one operand format, so that each kernel
// below is written once: F32Tile, float32 vectors (products summed one at a
// time), and with AVX512-BF16 Bf16PairTile, bfloat16 pairs along the summed
// index (two products per lane per vdpbf16ps). Elem is an operand row's
// element, Operand a vector of them, Acc the float32 sums.
struct F32Tile {
  using Elem = float;
  using Operand = vfloat;
  using Acc = vfloat;
  static Acc zero() { return Acc{}; }
  static Acc load_acc(const float* p) { return load(p); }
  static void store_acc(float* p, Acc v) { store(p, v); }
  static Operand load_op(const float* p) { return load(p); }
  static Operand splat_op(float x) { return splat(x); }
  static Acc madd(Acc acc, Operand a, Operand b) { return acc + a * b; }
};

// Both products as one register-blocked outer-product kernel: for R rows and
// C vectors of columns, o[r][c] (+)= sum_k a(r, k) * b[k][c], a(r, k) one
// element broadcast to a vector, b[k] the row at b + k ld_b. kAccumulate:
// the sums start from o, else from zero.
template <class T, int R, int C, bool kAccumulate, class ElementOfA>
inline void outer_product_tile(int64_t n, ElementOfA a, const typename T::Elem* b, int64_t ld_b, float* o,
                               int64_t ld_o) {
  typename T::Acc acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = kAccumulate ? T::load_acc(o + r * ld_o + c * kVec) : T::zero();
  for (int64_t k = 0; k < n; ++k) {
    typename T::Operand bv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) bv[c] = T::load_op(b + k * ld_b + c * kVec);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename T::Operand av = T::splat_op(a(r, k));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = T::madd(acc[r][c], av, bv[c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) T::store_acc(o + r * ld_o + c * kVec, acc[r][c]);
}

// st[j][i] = sum_e k_j[e] * qt[e][i] for kKeyRows keys and kQueryVecs vectors
// of queries; key row j starts at key[j] (rows of the strided K projection).
// Bf16PairTile: key row j as d pairs (e, e+1), qt[e][i] the pair of query i.
template <class T>
inline void score_tile(const typename T::Elem* const* key, int64_t d, const typename T::Elem* qt, int64_t ld_qt,
                       float* st, int64_t ld_st) {
  outer_product_tile<T, kKeyRows, kQueryVecs, false>(
      d, [key](int r, int64_t e) { return key[r][e]; }, qt, ld_qt, st, ld_st);
}

// o[r][c] += sum_j pt[j][r] * v[j][c] for kOutRows queries and NV vectors of
// output columns (pt = probabilities, transposed like the scores).
// Bf16PairTile: j runs over pairs of keys, pt[j][r] the probabilities of
// keys 2 j, 2 j + 1 for query r, v[j][c] their values in column c.
template <class T, int NV>
inline void pv_tile(const typename T::Elem* pt, int64_t ld_pt, int64_t keys, const typename T::Elem* v, int64_t ld_v,
                    float* o, int64_t ld_o) {
  outer_product_tile<T, kOutRows, NV, true>(
      keys, [pt, ld_pt](int r, int64_t j) { return pt[j * ld_pt + r]; }, v, ld_v, o, ld_o);
}

// pv_tile over `vecs` vectors of output columns: 4-wide chunks, then the
// remainder in one tile.
template <class T>
void pv_rows(const typename T::Elem* pt, int64_t ld_pt, int64_t keys, const typename T::Elem* v, int64_t ld_v,
             float* o, int64_t ld_o, int64_t vecs) {
  for (int64_t c = 0; c < vecs;) {
    const int64_t left = vecs - c;
    const int64_t n = left <= kMaxOutVecs ? left : 4;
    const typename T::Elem* vc = v + c * kVec;
    float* oc = o + c * kVec;
    switch (n) {
      case 1: pv_tile<T, 1>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
      case 2: pv_tile<T, 2>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
      case 3: pv_tile<T, 3>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
      case 4: pv_tile<T, 4>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
      case 5: pv_tile<T, 5>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
      default: pv_tile<T, 6>(pt, ld_pt, keys, vc, ld_v, oc, ld_o); break;
    }
    c += n;
  }
}

inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

#if defined(__AVX512BF16__)
constexpr bool kNativeBf16 = true;
static_assert(kVec == 16);

// dst[c] = bf16(lo[c]) | bf16(hi[c]) << 16 for c < n (n a multiple of 16),
// only the first `valid` columns of lo / hi read (the rest taken as 0); a
// null row is zeros. The pairs vdpbf16ps sums along.
inline void pack_pairs(const float* lo, const float* hi, int64_t valid, int64_t n, uint32_t* dst) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = valid - c >= 16 ? __mmask16(0xffff) : valid > c ? __mmask16((1u << (valid - c)) - 1) : 0;
    const __m512 a = lo ? _mm512_maskz_loadu_ps(m, lo + c) : _mm512_setzero_ps();
    const __m512 b = hi ? _mm512_maskz_loadu_ps(m, hi + c) : _mm512_setzero_ps();
    const __m512bh x = _mm512_cvtne2ps_pbh(b, a);  // a in the low 16 elements, b in the high 16
    _mm512_storeu_si512(dst + c, _mm512_permutexvar_epi16(interleave, reinterpret_cast<const __m512i&>(x)));
  }
}

struct Bf16PairTile {
  using Elem = uint32_t;
  using Operand = __m512i;
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  static Acc load_acc(const float* p) { return _mm512_loadu_ps(p); }
  static void store_acc(float* p, Acc v) { _mm512_storeu_ps(p, v); }
  static Operand load_op(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static Operand splat_op(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static Acc madd(Acc acc, Operand a, Operand b) { return dot_bf16_pairs(acc, a, b); }
};
#else
constexpr bool kNativeBf16 = false;
#endif

}  // namespace

void attention(const AttentionArgs& a) {
  if (!a.q || !a.k || !a.v || !a.out || a.head_dim <= 0 || a.q_len < 0 || a.kv_len <= 0)
    throw std::invalid_argument("attention: bad arguments");
  if (a.kv_lens)
    for (int64_t b = 0; b < a.batch; ++b)
      if (a.kv_lens[b] < 1 || a.kv_lens[b] > a.kv_len) throw std::invalid_argument("attention: bad kv_lens");
  if (attention_uses_onednn(a)) {
    attention_onednn(a);
    return;
  }
  const bool bf16 = a.compute == DType::kBF16;
  const bool native = bf16 && kNativeBf16 && !bf16_hooks().emulate;  // else bf16 is emulated in the float32 tiles
  const int64_t d = a.head_dim;
  const int64_t d_pad = round_up(d, kVec);  // packed V / output row length
  const int64_t d2 = (d + 1) / 2;           // bf16 pairs along a key or query row
  const int64_t vecs = d_pad / kVec;
  const int64_t q_tiles = (a.q_len + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = a.batch * a.heads * q_tiles;
  constexpr int64_t kQ = kQueryTile;
  constexpr int64_t kKeyPad = round_up(kKeyTile, kKeyRows);
  constexpr int64_t kPairs = kKeyTile / 2;
  static_assert(kKeyTile % 2 == 0);

#pragma omp parallel
  {
    std::vector<float> qt(d * kQ);             // (D, Bq) scaled queries, transposed; zero past the end
    std::vector<float> st(kKeyPad * kQ);       // (Bk, Bq) scores, then probabilities, transposed
    std::vector<float> vp(kKeyTile * d_pad);   // (Bk, Dpad) values in whole-vector rows
    std::vector<float> kr;                     // (Bk, D) keys rounded to bfloat16 (emulated bf16)
    std::vector<float> acc(kQ * d_pad);        // (Bq, Dpad) unnormalised output
    std::vector<float> row_max(kQ), row_sum(kQ), correction(kQ);
    // Native bf16: (D/2, Bq) query pairs, (Bk, 2 D/2) key rows, (Bk/2, Dpad)
    // value pairs, (Bk/2, Bq) probability pairs.
    std::vector<uint32_t> qp, kp, vp2, pp;
    if (native) {
      qp.assign(d2 * kQ, 0);
      kp.assign(kKeyPad * d2, 0);
      vp2.assign(kPairs * d_pad, 0);
      pp.assign(kPairs * kQ, 0);
    } else if (bf16) {
      kr.assign(kKeyPad * d, 0.0f);
    }

#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t qtile = task % q_tiles, bh = task / q_tiles;
      const int64_t h = bh % a.heads, b = bh / a.heads;
      const int64_t q0 = qtile * kQ, bq = std::min(kQ, a.q_len - q0);
      const int64_t kv_len = a.kv_lens ? a.kv_lens[b] : a.kv_len;  // this sample's keys
      const float* kb = static_cast<const float*>(a.k) + b * a.k_batch_stride + h * d;
      const float* vb = static_cast<const float*>(a.v) + b * a.v_batch_stride + h * d;

      // Transpose the query tile (contiguous writes, strided reads: cheaper
      // than scattering each row); bf16: pairs of the rounded scaled queries.
      const float* qsrc = static_cast<const float*>(a.q) + b * a.q_batch_stride + q0 * a.q_row_stride + h * d;
      if (native) {
        for (int64_t e2 = 0; e2 < d2; ++e2) {
          uint32_t* dst = qp.data() + e2 * kQ;
          for (int64_t i = 0; i < bq; ++i) {
            const float* q = qsrc + i * a.q_row_stride;
            const uint32_t lo = f32_to_bf16(q[2 * e2] * a.scale);
            const uint32_t hi = 2 * e2 + 1 < d ? f32_to_bf16(q[2 * e2 + 1] * a.scale) : 0u;
            dst[i] = lo | hi << 16;
          }
          std::fill(dst + bq, dst + kQ, 0u);
        }
      } else {
        for (int64_t e = 0; e < d; ++e) {
          float* dst = qt.data() + e * kQ;
          for (int64_t i = 0; i < bq; ++i) dst[i] = qsrc[i * a.q_row_stride + e] * a.scale;
          if (bf16)
            for (int64_t i = 0; i < bq; ++i) dst[i] = round_bf16(dst[i]);
          std::fill(dst + bq, dst + kQ, 0.0f);
        }
      }
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<float>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);

      for (int64_t k0 = 0; k0 < kv_len; k0 += kKeyTile) {
        const int64_t bk = std::min(kKeyTile, kv_len - k0);
        const int64_t bk_pad = round_up(bk, kKeyRows);
        // S^T, kKeyRows keys at a time; rows past the last key repeat it
        // (valid memory) and are masked out below.
        if (native) {
#if defined(__AVX512BF16__)
          // Key rows as bf16: consecutive elements are the pairs.
          for (int64_t j = 0; j < bk; ++j) {
            uint16_t* row = reinterpret_cast<uint16_t*>(kp.data() + j * d2);
            round_to_bf16(kb + (k0 + j) * a.k_row_stride, d, row);
            if (d % 2) row[d] = 0;
          }
          for (int64_t j = 0; j < bk_pad; j += kKeyRows) {
            const uint32_t* rows[kKeyRows];
            for (int r = 0; r < kKeyRows; ++r) rows[r] = kp.data() + std::min(j + r, bk - 1) * d2;
            for (int64_t i = 0; i < kQ; i += kQueryVecs * kVec)
              score_tile<Bf16PairTile>(rows, d2, qp.data() + i, kQ, st.data() + j * kQ + i, kQ);
          }
#endif
        } else {
          if (bf16)
            for (int64_t j = 0; j < bk; ++j)
              for (int64_t e = 0; e < d; ++e) kr[j * d + e] = round_bf16(kb[(k0 + j) * a.k_row_stride + e]);
          for (int64_t j = 0; j < bk_pad; j += kKeyRows) {
            const float* rows[kKeyRows];
            for (int r = 0; r < kKeyRows; ++r) {
              const int64_t row = std::min(j + r, bk - 1);
              rows[r] = bf16 ? kr.data() + row * d : kb + (k0 + row) * a.k_row_stride;
            }
            for (int64_t i = 0; i < kQ; i += kQueryVecs * kVec)
              score_tile<F32Tile>(rows, d, qt.data() + i, kQ, st.data() + j * kQ + i, kQ);
          }
        }
        // S^T[j][i] += bias(h, q0 + i, k0 + j): a transposed add, done in
        // blocks of kBiasBlock keys so that the part of S^T written across
        // stays in L1 while the bias rows are read along (whole rows of 256
        // keys missed L1 and cost several times more). Columns i >= bq are
        // padding and stay as they are (their bias rows may lie past the
        // caller's table).
        if (a.bias) {
          const float* bias = a.bias + h * a.bias_head_stride + q0 * a.bias_row_stride + k0;
          for (int64_t j0 = 0; j0 < bk; j0 += kBiasBlock) {
            const int64_t j1 = std::min(bk, j0 + kBiasBlock);
            for (int64_t i = 0; i < bq; ++i) {
              const float* br = bias + i * a.bias_row_stride;
              for (int64_t j = j0; j < j1; ++j) st[j * kQ + i] += br[j];
            }
          }
        }
        // Online softmax down the columns (one column per query).
        for (int64_t i = 0; i < kQ; ++i) correction[i] = row_max[i];
        for (int64_t j = 0; j < bk; ++j) {
          const float* s = st.data() + j * kQ;
#pragma omp simd
          for (int64_t i = 0; i < kQ; ++i) row_max[i] = std::max(row_max[i], s[i]);
        }
#pragma omp simd
        for (int64_t i = 0; i < kQ; ++i) {
          correction[i] = math::softmax_rescale(correction[i], row_max[i]);  // ~0 on the first chunk (-inf)
          row_sum[i] *= correction[i];
        }
        for (int64_t j = 0; j < bk; ++j) {
          float* s = st.data() + j * kQ;
#pragma omp simd
          for (int64_t i = 0; i < kQ; ++i) {
            s[i] = math::softmax_weight(s[i], row_max[i]);
            row_sum[i] += s[i];
          }
        }
        for (int64_t i = 0; i < bq; ++i) {
          if (correction[i] == 1.0f) continue;
          float* o = acc.data() + i * d_pad;
#pragma omp simd
          for (int64_t e = 0; e < d_pad; ++e) o[e] *= correction[i];
        }
        // P V. The sum of the probabilities (row_sum) is of the float32
        // ones, as the softmax's denominator is float32; bf16 rounds only
        // the factors of the products.
        if (native) {
#if defined(__AVX512BF16__)
          const int64_t pairs = (bk + 1) / 2;
          for (int64_t j2 = 0; j2 < pairs; ++j2) {
            const int64_t j = 2 * j2;
            const float* hi_v = j + 1 < bk ? vb + (k0 + j + 1) * a.v_row_stride : nullptr;
            pack_pairs(vb + (k0 + j) * a.v_row_stride, hi_v, d, d_pad, vp2.data() + j2 * d_pad);
            pack_pairs(st.data() + j * kQ, j + 1 < bk ? st.data() + (j + 1) * kQ : nullptr, kQ, kQ,
                       pp.data() + j2 * kQ);
          }
          for (int64_t r = 0; r < round_up(bq, kOutRows); r += kOutRows)
            pv_rows<Bf16PairTile>(pp.data() + r, kQ, pairs, vp2.data(), d_pad, acc.data() + r * d_pad, d_pad, vecs);
#endif
        } else {
          for (int64_t j = 0; j < bk; ++j) {
            float* vr = vp.data() + j * d_pad;
            const float* src = vb + (k0 + j) * a.v_row_stride;
            if (bf16)
              for (int64_t e = 0; e < d; ++e) vr[e] = round_bf16(src[e]);
            else
              std::memcpy(vr, src, d * sizeof(float));
            std::fill(vr + d, vr + d_pad, 0.0f);
          }
          if (bf16)
            for (int64_t j = 0; j < bk; ++j)
              for (int64_t i = 0; i < kQ; ++i) st[j * kQ + i] = round_bf16(st[j * kQ + i]);
          for (int64_t r = 0; r < round_up(bq, kOutRows); r += kOutRows)
            pv_rows<F32Tile>(st.data() + r, kQ, bk, vp.data(), d_pad, acc.data() + r * d_pad, d_pad, vecs);
        }
      }

      float* out = static_cast<float*>(a.out) + b * a.out_batch_stride + q0 * a.out_row_stride + h * d;
      if (a.lse) {
        float* lse = a.lse + (b * a.heads + h) * a.q_len + q0;
        for (int64_t i = 0; i < bq; ++i) lse[i] = math::softmax_lse(row_max[i], row_sum[i]);
      }
      for (int64_t i = 0; i < bq; ++i) {
        const float inv = 1.0f / row_sum[i];
        const float* o = acc.data() + i * d_pad;
        float* dst = out + i * a.out_row_stride;
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) dst[e] = o[e] * inv;
      }
    }
  }
}

void attention_merge_(float* out, float* lse, const float* out2, const float* lse2, int64_t batch, int64_t heads,
                      int64_t q_len, int64_t head_dim, int64_t row_stride, int64_t batch_stride) {
#pragma omp parallel for collapse(2) if (batch * heads * q_len * head_dim > 65536)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < q_len; ++i) {
        float& l1 = lse[(b * heads + h) * q_len + i];
        const math::LseMerge w = math::lse_merge(l1, lse2[(b * heads + h) * q_len + i]);
        float* o = out + b * batch_stride + i * row_stride + h * head_dim;
        const float* o2 = out2 + b * batch_stride + i * row_stride + h * head_dim;
#pragma omp simd
        for (int64_t e = 0; e < head_dim; ++e) o[e] = math::lse_merge_value(w, o[e], o2[e]);
        l1 = w.lse;
      }
}

}  // namespace ditgen::ops::cpu
