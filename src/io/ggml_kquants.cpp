// K-quant quantizers: the three searches ggml's reference quantizers use,
// then one function per format that runs them over the sub-blocks, packs
// the sub-block scales, and re-quantizes against the decoded scales. Every
// float operation is written in ggml's order (compiled with
// -ffp-contract=off: no fused multiply-adds), so the result does not
// depend on the compiler's choices.
#include "io/ggml_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/math/ggml_blocks.h"
#include "tensor/half.h"

namespace ditgen::io::kquants {
namespace {

constexpr int kQK_K = math::kQK_K;
constexpr float kGroupMaxEps = 1e-15f;  // a sub-block below this magnitude is all zero

// Round to nearest, ties to even, through float addition of 1.5 * 2^23 (as
// ggml's nearest_int); the argument is kept inside the range where that
// trick is exact (the searches never leave it for finite input).
int nearest_int(float v) {
  v = std::clamp(v, -4194303.0f, 4194303.0f);
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

float f16_round_trip(float v, uint8_t* out) {  // stores f16(v) at `out`, returns its value
  const uint16_t h = f32_to_f16(v);
  out[0] = static_cast<uint8_t>(h & 0xff);
  out[1] = static_cast<uint8_t>(h >> 8);
  return f16_to_f32(h);
}

// The value of largest magnitude among x[0, n) (the first on ties, 0 when
// all are zero), its magnitude in `amax`.
float largest_magnitude(int n, const float* x, float& amax) {
  float max = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  return max;
}

// Signed levels L in [0, 2 nmax) (value L - nmax) for n values and the
// scale minimising sum x^2 (x - scale (L - nmax))^2, trying 19 candidate
// scales around nmax / max|x| (ggml's make_qx_quants, rmse_type 1).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = largest_magnitude(n, x, amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  // The levels for 1 / scale = iscale (into L when given) and their
  // x^2-weighted sums sum w x l, sum w l^2.
  auto levels = [&](float iscale, int8_t* out, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
      if (out) out[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  float sumlx, suml2;
  levels(static_cast<float>(-nmax) / max, L, sumlx, suml2);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    levels(iscale, nullptr, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      levels(iscale, L, sumlx, suml2);  // the same sums again, and the levels kept
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's search: levels in [-nmax, nmax) from nmax / max|x|, then up to five
// passes moving single levels while that lowers the x^2-weighted error
// (ggml's make_q3_quants with do_rmse); L returned offset by nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = largest_magnitude(n, x, amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Unsigned levels L in [0, nmax] with a scale and a minimum (value
// scale * L - the_min), the weighted squared (or, use_mad, absolute) error
// minimised over nstep + 1 candidate scales (rmin + rdelta * k + nmax) /
// (max - min), each with its least-squares scale and minimum (ggml's
// make_qkx2_quants). Returns the scale; the_min is the (non-negative)
// amount subtracted.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  auto error_of = [&](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += weights[i] * error_of(diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i], fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        error += weights[i] * error_of(diff);
      }
      if (error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Two bits per value at 32 * (4 h + s) + l into byte 32 h + l, bits 2 s
// (Q2_K's and Q3_K's packing).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K / Q5_K: eight 32-element sub-blocks with a scale and a minimum each,
// both quantized to 6 bits against d = max scale / 63 and dmin = max min / 63.
// Fills the 12 scale bytes, d and dmin at b, and the levels L (0 .. nmax).
void quantize_k_scales_mins(const float* x, uint8_t* b, int nmax, float rmin, float rdelta, int nstep, uint8_t* L) {
  float scales[8], mins[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* sc = b + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  const float d = f16_round_trip(max_scale / 63.0f, b);
  const float dmin = f16_round_trip(max_min / 63.0f, b + 2);
  for (int j = 0; j < 8; ++j) {  // re-quantize against the decoded sub-block scales
    float s, m;
    math::ggml_detail::k_scale_min(sc, j, s, m);
    const float dl = d * s;
    if (dl == 0.0f) continue;
    const float ml = dmin * m;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + l] + ml) / dl))));
  }
}

}  // namespace

void quantize_block_q2_k(const float* x, uint8_t* b) {
  uint8_t L[kQK_K], Laux[16];
  float weights[16], mins[16], scales[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  uint8_t* sc = b;  // layout: 16 scale bytes, 64 bytes of values, d, dmin
  float d = 0, dmin = 0;
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    d = f16_round_trip(max_scale / 15.0f, b + 80);
  } else {
    std::memset(sc, 0, 16);
    d = f16_round_trip(0.0f, b + 80);
  }
  if (max_min > 0) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) sc[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
    dmin = f16_round_trip(max_min / 15.0f, b + 82);
  } else {
    dmin = f16_round_trip(0.0f, b + 82);
  }
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(sc[j] & 0xf);
    if (dl == 0.0f) continue;
    const float ml = dmin * static_cast<float>(sc[j] >> 4);
    for (int l = 0; l < 16; ++l)
      L[16 * j + l] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + l] + ml) / dl))));
  }
  pack_2bit(L, b + 16);
}

void quantize_block_q3_k(const float* x, uint8_t* b) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > amax) amax = a, max_scale = scales[j];
  }
  uint8_t* hmask = b;  // layout: 32 bytes of high bits, 64 of low 2 bits, 12 of scales, d
  uint8_t* sc = b + 96;
  std::memset(sc, 0, 12);
  float d = 0;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
      if (j < 8)
        sc[j] = static_cast<uint8_t>(l & 0xf);
      else
        sc[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
      sc[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    d = f16_round_trip(1 / iscale, b + 108);
  } else {
    d = f16_round_trip(0.0f, b + 108);
  }
  for (int j = 0; j < 16; ++j) {
    const int low4 = j < 8 ? (sc[j] & 0xf) : (sc[j - 8] >> 4);
    const int s = (low4 | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    const float dl = d * static_cast<float>(s);
    if (dl == 0.0f) continue;
    for (int l = 0; l < 16; ++l)
      L[16 * j + l] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + l] / dl))) + 4);
  }
  // The third bit of element 32 k + l goes to bit k of hmask[l].
  std::memset(hmask, 0, 32);
  uint8_t low[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    if (L[j] > 3) hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
    low[j] = static_cast<uint8_t>(L[j] > 3 ? L[j] - 4 : L[j]);
  }
  pack_2bit(low, b + 32);
}

void quantize_block_q4_k(const float* x, uint8_t* b) {
  uint8_t L[kQK_K];
  quantize_k_scales_mins(x, b, 15, -1.0f, 0.1f, 20, L);
  uint8_t* q = b + 16;  // element 64 c + 32 n + l: nibble n of byte 32 c + l
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) q[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
}

void quantize_block_q5_k(const float* x, uint8_t* b) {
  uint8_t L[kQK_K];
  quantize_k_scales_mins(x, b, 31, -0.5f, 0.1f, 15, L);
  uint8_t* qh = b + 16;  // the fifth bit of element 32 j + l: bit j of qh[l]
  uint8_t* ql = b + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l], hi = L[64 * c + l + 32];
      qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      ql[32 * c + l] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
    }
}

void quantize_block_q6_k(const float* x, uint8_t* b) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_qx_quants(16, 32, x + 16 * j, L + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > max_abs_scale) max_abs_scale = a, max_scale = scales[j];
  }
  std::memset(b, 0, math::kQ6_KBytes);  // layout: 128 bytes of low nibbles, 64 of high pairs, 16 scales, d
  if (max_abs_scale < kGroupMaxEps) return;  // all zero (d = 0)
  const float iscale = -128.0f / max_scale;
  const float d = f16_round_trip(1 / iscale, b + 208);
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(sc[j]);
    if (dl == 0.0f) continue;
    for (int l = 0; l < 16; ++l)
      L[16 * j + l] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * j + l] / dl))) + 32);
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[128 * h + l], q2 = L[128 * h + l + 32], q3 = L[128 * h + l + 64], q4 = L[128 * h + l + 96];
      ql[64 * h + l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
}

}  // namespace ditgen::io::kquants
