// conv2d on CPU: im2col + one GEMM per chunk of output rows.
//
// For one image, out[Cout, Ho*Wo] = W[Cout, Cin*kh*kw] · col[Cin*kh*kw, Ho*Wo],
// where col row (ci, ky, kx) holds the input pixels that kernel tap sees for
// every output position (zeros in the padding). The weight needs no
// repacking: [Cout, Cin, kh, kw] row-major already is [Cout, Cin*kh*kw].
//
// The column matrix is 9x the input for a 3x3 kernel (1.2 MB per output row
// of a 256-wide, 128-channel map), so it is built for a chunk of output rows
// at a time, sized to stay cache-resident and bounded (<= 32 MB). The
// GEMM writes the chunk straight into the NCHW output with ldc = Ho*Wo, since
// output channel co's chunk rows are contiguous there. A 1x1 stride-1
// unpadded conv is already a plain GEMM on the input: no im2col.
//
// Threads: im2col rows are independent (OpenMP over them); the GEMM is
// threaded by OpenBLAS (the same OpenMP pool).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <omp.h>

#include "ops/cpu/cpu_ops.h"

namespace ditgen::ops::cpu {
namespace {

// im2col bytes per thread: about one core's L2, so the column chunk is still
// cached when the GEMM packs it (measured on Sapphire Rapids, 1 thread: 0.25
// to 8 MB are within noise for 128..512 channels, larger budgets cost 2x on
// convs with few output channels, where the GEMM is bound by reading col).
// The GEMM splits N = chunk rows x Wo across threads, so the budget scales
// with the thread count to keep each thread's share the same.
constexpr int64_t kColBytesPerThread = 2ll << 20;
constexpr int64_t kColBytesMax = 32ll << 20;

struct ConvGeom {
  int64_t B, Cin, H, W, Cout, kh, kw, stride, pad, Ho, Wo;
};

// col[k, (oy - oy0) * Wo + ox] for output rows [oy0, oy1) of image x
// (x: [Cin, H, W]); k = (ci * kh + ky) * kw + kx.
void im2col_rows(const float* x, const ConvGeom& g, int64_t oy0, int64_t oy1, float* col) {
  const int64_t K = g.Cin * g.kh * g.kw;
  const int64_t n = (oy1 - oy0) * g.Wo;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < K; ++k) {
    const int64_t kx = k % g.kw, ky = (k / g.kw) % g.kh, ci = k / (g.kw * g.kh);
    const float* xc = x + ci * g.H * g.W;
    float* dst = col + k * n;
    // Output columns whose input column ix = ox*stride - pad + kx is inside
    // [0, W): ox in [ox_lo, ox_hi).
    const int64_t off = kx - g.pad;
    int64_t ox_lo = off >= 0 ? 0 : (-off + g.stride - 1) / g.stride;
    int64_t ox_hi = g.W - off <= 0 ? 0 : (g.W - off + g.stride - 1) / g.stride;
    ox_lo = std::min(ox_lo, g.Wo);
    ox_hi = std::clamp(ox_hi, ox_lo, g.Wo);
    for (int64_t oy = oy0; oy < oy1; ++oy, dst += g.Wo) {
      const int64_t iy = oy * g.stride - g.pad + ky;
      if (iy < 0 || iy >= g.H) {
        std::memset(dst, 0, g.Wo * sizeof(float));
        continue;
      }
      const float* src = xc + iy * g.W;  // input row iy; pixel ix = ox * stride + off
      std::memset(dst, 0, ox_lo * sizeof(float));
      if (g.stride == 1) {
        std::memcpy(dst + ox_lo, src + ox_lo + off, (ox_hi - ox_lo) * sizeof(float));
      } else {
        for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox] = src[ox * g.stride + off];
      }
      std::memset(dst + ox_hi, 0, (g.Wo - ox_hi) * sizeof(float));
    }
  }
}

// Rows [oy0, oy1) of every output channel start as the bias (or zero), so
// the GEMM can accumulate with beta = 1.
void fill_bias(float* out, const float* bias, const ConvGeom& g, int64_t oy0, int64_t oy1) {
  const int64_t plane = g.Ho * g.Wo, n = (oy1 - oy0) * g.Wo;
#pragma omp parallel for schedule(static)
  for (int64_t co = 0; co < g.Cout; ++co) {
    float* dst = out + co * plane + oy0 * g.Wo;
    const float v = bias[co];
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  }
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding) {
  if (x.ndim() != 4 || w.ndim() != 4)
    throw std::invalid_argument("conv2d: expected x [B, Cin, H, W] and w [Cout, Cin, kh, kw], got " +
                                shape_str(x.shape()) + " and " + shape_str(w.shape()));
  ConvGeom g{};
  g.B = x.dim(0), g.Cin = x.dim(1), g.H = x.dim(2), g.W = x.dim(3);
  g.Cout = w.dim(0), g.kh = w.dim(2), g.kw = w.dim(3);
  g.stride = stride, g.pad = padding;
  if (w.dim(1) != g.Cin)
    throw std::invalid_argument("conv2d: x " + shape_str(x.shape()) + " has " + std::to_string(g.Cin) +
                                " channels but w " + shape_str(w.shape()) + " expects " + std::to_string(w.dim(1)));
  if (bias && bias->numel() != g.Cout)
    throw std::invalid_argument("conv2d: bias " + shape_str(bias->shape()) + " for " + std::to_string(g.Cout) +
                                " output channels");
  if (stride < 1 || padding < 0)
    throw std::invalid_argument("conv2d: stride must be >= 1 and padding >= 0");
  g.Ho = (g.H + 2 * padding - g.kh) / stride + 1;
  g.Wo = (g.W + 2 * padding - g.kw) / stride + 1;
  if (g.H + 2 * padding < g.kh || g.W + 2 * padding < g.kw || g.Ho < 1 || g.Wo < 1)
    throw std::invalid_argument("conv2d: kernel " + shape_str(w.shape()) + " larger than padded input " +
                                shape_str(x.shape()));

  Tensor out = Tensor::empty({g.B, g.Cout, g.Ho, g.Wo});  // (B, Cout, Ho, Wo)
  const int64_t K = g.Cin * g.kh * g.kw;
  const int64_t in_plane = g.Cin * g.H * g.W, out_plane = g.Cout * g.Ho * g.Wo, hw_out = g.Ho * g.Wo;
  const float beta = bias ? 1.0f : 0.0f;

  if (g.kh == 1 && g.kw == 1 && stride == 1 && padding == 0) {
    for (int64_t b = 0; b < g.B; ++b) {
      float* o = out.data() + b * out_plane;
      if (bias) fill_bias(o, bias->data(), g, 0, g.Ho);
      gemm(false, false, g.Cout, hw_out, K, 1.0f, w.data(), K, x.data() + b * in_plane, hw_out, beta, o, hw_out);
    }
    return out;
  }

  const int64_t row_bytes = K * g.Wo * static_cast<int64_t>(sizeof(float));
  const int64_t budget = std::min<int64_t>(kColBytesPerThread * omp_get_max_threads(), kColBytesMax);
  const int64_t chunk = std::clamp<int64_t>(budget / row_bytes, 1, g.Ho);
  Tensor col = Tensor::empty({K, chunk * g.Wo});  // (Cin*kh*kw, chunk*Wo) im2col of a row chunk
  for (int64_t b = 0; b < g.B; ++b) {
    const float* xb = x.data() + b * in_plane;
    float* o = out.data() + b * out_plane;
    for (int64_t oy0 = 0; oy0 < g.Ho; oy0 += chunk) {
      const int64_t oy1 = std::min(oy0 + chunk, g.Ho), n = (oy1 - oy0) * g.Wo;
      im2col_rows(xb, g, oy0, oy1, col.data());
      if (bias) fill_bias(o, bias->data(), g, oy0, oy1);
      gemm(false, false, g.Cout, n, K, 1.0f, w.data(), K, col.data(), n, beta, o + oy0 * g.Wo, hw_out);
    }
  }
  return out;
}

}  // namespace ditgen::ops::cpu
