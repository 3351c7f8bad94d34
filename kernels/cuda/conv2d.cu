// conv2d on the GPU: im2col + one cuBLAS GEMM per chunk of output rows, the
// CPU op's scheme (src/ops/cpu/conv2d.cpp).
//
// For one image, out[Cout, Ho*Wo] = W[Cout, Cin*kh*kw] · col[Cin*kh*kw, Ho*Wo];
// col row (ci, ky, kx) holds the input pixels that tap sees for each output
// position (zero in the padding), and [Cout, Cin, kh, kw] already is the
// [Cout, K] row-major weight. Columns are built for as many output rows as fit
// kColBytes (bounded scratch whatever the image size), and each chunk's GEMM
// writes straight into the NCHW output with ldc = Ho*Wo. A 1x1, stride-1,
// unpadded conv is a plain GEMM on the input, batched over images. The bias
// is added by one pass over the output afterwards.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

constexpr int64_t kColBytes = int64_t{64} << 20;

struct Geom {
  int64_t cin, h, w, cout, kh, kw, stride, pad, ho, wo;
};

// col[k, p] for output rows [oy0, oy0 + n / Wo) of one image x [Cin, H, W]:
// k = (ci * kh + ky) * kw + kx, p = (oy - oy0) * Wo + ox.
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, Geom g, int64_t oy0, int64_t n,
                              int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i / n, p = i - k * n;
    const int64_t oy = oy0 + p / g.wo, ox = p % g.wo;
    const int64_t kx = k % g.kw, ky = (k / g.kw) % g.kh, ci = k / (g.kw * g.kh);
    const int64_t iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    col[i] = inside ? x[(ci * g.h + iy) * g.w + ix] : from_float<T>(0.0f);
  }
}

// y[b, c, p] += bias[c] over y [B, C, plane].
template <class T>
__global__ void bias_channels_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t channels, int64_t plane,
                                     int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) + to_float(bias[(i / plane) % channels]));
}

}  // namespace

void conv2d(const void* x, const void* w, const void* bias, void* y, int64_t batch, int64_t in_channels,
            int64_t height, int64_t width, int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride,
            int64_t padding, DType dtype) {
  if (stride < 1 || padding < 0) throw std::invalid_argument("conv2d: stride must be >= 1 and padding >= 0");
  Geom g{in_channels, height, width, out_channels, kernel_h, kernel_w, stride, padding, 0, 0};
  if (g.h + 2 * padding < g.kh || g.w + 2 * padding < g.kw)
    throw std::invalid_argument("conv2d: kernel larger than the padded input");
  g.ho = (g.h + 2 * padding - g.kh) / stride + 1;
  g.wo = (g.w + 2 * padding - g.kw) / stride + 1;
  const int64_t K = g.cin * g.kh * g.kw, plane = g.ho * g.wo;
  const int64_t in_image = g.cin * g.h * g.w, out_image = g.cout * plane;
  if (batch <= 0 || out_image <= 0) return;
  const size_t esize = dtype_size(dtype);
  auto in_at = [&](int64_t b) { return static_cast<const char*>(x) + b * in_image * static_cast<int64_t>(esize); };
  auto out_at = [&](int64_t b, int64_t off) {
    return static_cast<char*>(y) + (b * out_image + off) * static_cast<int64_t>(esize);
  };

  if (g.kh == 1 && g.kw == 1 && stride == 1 && padding == 0) {
    // Every image: out_b[Cout, HW] = W[Cout, Cin] · x_b[Cin, HW]; W shared (stride 0).
    gemm_strided_batched(false, false, g.cout, plane, K, 1.0f, w, K, 0, x, plane, in_image, 0.0f, y, plane, out_image,
                         batch, dtype);
  } else {
    const int64_t row_bytes = K * g.wo * static_cast<int64_t>(esize);
    const int64_t chunk = std::clamp<int64_t>(kColBytes / std::max<int64_t>(row_bytes, 1), 1, g.ho);
    DeviceBuffer col(static_cast<size_t>(K * chunk * g.wo) * esize);  // (K, chunk * Wo) columns of a row chunk
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy0 = 0; oy0 < g.ho; oy0 += chunk) {
        const int64_t rows = std::min(chunk, g.ho - oy0), n = rows * g.wo, total = K * n;
        dispatch_dtype(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          im2col_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(reinterpret_cast<const T*>(in_at(b)),
                                                                       col.as<T>(), g, oy0, n, total);
          DITGEN_CUDA_CHECK_LAUNCH();
        });
        gemm(false, false, g.cout, n, K, 1.0f, w, K, col.get(), n, 0.0f, out_at(b, oy0 * g.wo), plane, dtype);
      }
  }
  if (bias) {
    const int64_t total = batch * out_image;
    dispatch_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      bias_channels_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<T*>(y),
                                                                          static_cast<const T*>(bias), g.cout, plane,
                                                                          total);
      DITGEN_CUDA_CHECK_LAUNCH();
    });
  }
}

}  // namespace ditgen::cuda
