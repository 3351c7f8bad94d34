// conv3d on the GPU: vol2col + one cuBLAS GEMM per chunk of output lines,
// conv2d.cu's scheme one dimension up (correctness first; a cuDNN path can
// replace it later).
//
// For one video, out[Cout, To*Ho*Wo] = W[Cout, Cin*kt*kh*kw] · col[Cin*kt*kh*kw,
// To*Ho*Wo]; col row (ci, kz, ky, kx) holds the input values that tap sees
// for each output position (zero in the padding), and [Cout, Cin, kt, kh, kw]
// already is the [Cout, K] row-major weight. Columns are built for as many
// output lines (one (to, ho) pair: Wo positions) as fit kColBytes, and each
// chunk's GEMM writes straight into the NCDHW output with ldc = To*Ho*Wo. A
// 1x1x1, stride-1, unpadded conv is a plain GEMM on the input, batched over
// samples. The bias is added by one pass over the output afterwards.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

constexpr int64_t kColBytes = int64_t{64} << 20;

struct Geom3 {
  int64_t cin, cout;
  int64_t in[3], k[3], s[3], p[3], out[3];  // (t, h, w)
};

// col[k, q] for output lines [line0, line0 + n / Wo) of one sample x [Cin, T,
// H, W]: k = ((ci * kt + kz) * kh + ky) * kw + kx, q = (line - line0) * Wo + ox,
// line = oz * Ho + oy.
template <class T>
__global__ void vol2col_kernel(const T* __restrict__ x, T* __restrict__ col, Geom3 g, int64_t line0, int64_t n,
                               int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t kk = i / n, q = i - kk * n;
    const int64_t line = line0 + q / g.out[2], ox = q % g.out[2];
    const int64_t oz = line / g.out[1], oy = line % g.out[1];
    const int64_t kx = kk % g.k[2], ky = (kk / g.k[2]) % g.k[1], kz = (kk / (g.k[2] * g.k[1])) % g.k[0];
    const int64_t ci = kk / (g.k[2] * g.k[1] * g.k[0]);
    const int64_t iz = oz * g.s[0] - g.p[0] + kz, iy = oy * g.s[1] - g.p[1] + ky, ix = ox * g.s[2] - g.p[2] + kx;
    const bool inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
    col[i] = inside ? x[((ci * g.in[0] + iz) * g.in[1] + iy) * g.in[2] + ix] : from_float<T>(0.0f);
  }
}

// y[b, c, q] += bias[c] over y [B, C, volume].
template <class T>
__global__ void bias_channels_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t channels, int64_t volume,
                                     int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) + to_float(bias[(i / volume) % channels]));
}

}  // namespace

void conv3d(const void* x, const void* w, const void* bias, void* y, int64_t batch, int64_t in_channels,
            std::array<int64_t, 3> in_size, int64_t out_channels, std::array<int64_t, 3> kernel,
            std::array<int64_t, 3> stride, std::array<int64_t, 3> padding, DType dtype) {
  Geom3 g{};
  g.cin = in_channels;
  g.cout = out_channels;
  for (int a = 0; a < 3; ++a) {
    if (stride[a] < 1 || padding[a] < 0 || kernel[a] < 1 || in_size[a] + 2 * padding[a] < kernel[a])
      throw std::invalid_argument("conv3d: kernel larger than the padded input, stride < 1 or padding < 0");
    g.in[a] = in_size[a], g.k[a] = kernel[a], g.s[a] = stride[a], g.p[a] = padding[a];
    g.out[a] = (in_size[a] + 2 * padding[a] - kernel[a]) / stride[a] + 1;
  }
  const int64_t K = g.cin * g.k[0] * g.k[1] * g.k[2], volume = g.out[0] * g.out[1] * g.out[2];
  const int64_t in_sample = g.cin * g.in[0] * g.in[1] * g.in[2], out_sample = g.cout * volume;
  if (batch <= 0 || out_sample <= 0) return;
  const auto esize = static_cast<int64_t>(dtype_size(dtype));
  auto in_at = [&](int64_t b) { return static_cast<const char*>(x) + b * in_sample * esize; };
  auto out_at = [&](int64_t b, int64_t off) { return static_cast<char*>(y) + (b * out_sample + off) * esize; };

  const bool pointwise = K == g.cin && stride[0] == 1 && stride[1] == 1 && stride[2] == 1 && padding[0] == 0 &&
                         padding[1] == 0 && padding[2] == 0;
  if (pointwise) {
    // Every sample: out_b[Cout, THW] = W[Cout, Cin] · x_b[Cin, THW]; W shared (stride 0).
    gemm_strided_batched(false, false, g.cout, volume, K, 1.0f, w, K, 0, x, volume, in_sample, 0.0f, y, volume,
                         out_sample, batch, dtype);
  } else {
    const int64_t lines = g.out[0] * g.out[1];
    const int64_t line_bytes = K * g.out[2] * esize;
    const int64_t chunk = std::clamp<int64_t>(kColBytes / std::max<int64_t>(line_bytes, 1), 1, lines);
    DeviceBuffer col(static_cast<size_t>(K * chunk * g.out[2] * esize));  // (K, chunk * Wo) columns
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t line0 = 0; line0 < lines; line0 += chunk) {
        const int64_t n = std::min(chunk, lines - line0) * g.out[2], total = K * n;
        dispatch_dtype(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          vol2col_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(reinterpret_cast<const T*>(in_at(b)),
                                                                        col.as<T>(), g, line0, n, total);
          DITGEN_CUDA_CHECK_LAUNCH();
        });
        gemm(false, false, g.cout, n, K, 1.0f, w, K, col.get(), n, 0.0f, out_at(b, line0 * g.out[2]), volume, dtype);
      }
  }
  if (bias) {
    const int64_t total = batch * out_sample;
    dispatch_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      bias_channels_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<T*>(y),
                                                                          static_cast<const T*>(bias), g.cout, volume,
                                                                          total);
      DITGEN_CUDA_CHECK_LAUNCH();
    });
  }
}

}  // namespace ditgen::cuda
