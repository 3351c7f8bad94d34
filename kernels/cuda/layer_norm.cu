// LayerNorm on the GPU, plain (optional affine) and fused with adaLN
// modulation. One warp per row (rows are independent and C is a few
// thousand at most): two passes over the row as on the CPU (mean, then the
// squared deviations from it: no cancellation), then the output pass; the
// re-reads hit L1/L2. Formulas from kernels/math/norm.h, shared with the CPU.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/norm.h"

namespace ditgen::cuda {

namespace {

constexpr int kRowsPerBlock = 4;  // warps per block, one row each

// Modulate: y = modulate(LN(x), shift[b], scale[b]) with b = row / tokens;
// otherwise y = LN(x) * weight + bias (each optional).
template <class T, bool kModulate>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                                  const T* __restrict__ shift, const T* __restrict__ scale, int64_t mod_stride,
                                  T* __restrict__ y, int64_t rows, int64_t tokens, int64_t channels, float eps) {
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5); row < rows;
       row += int64_t{gridDim.x} * kRowsPerBlock) {
    const T* xr = x + row * channels;
    T* yr = y + row * channels;
    float s = 0.0f;
    for (int64_t j = lane; j < channels; j += 32) s += to_float(xr[j]);
    const float mean = warp_sum(s) / static_cast<float>(channels);
    float v = 0.0f;
    for (int64_t j = lane; j < channels; j += 32) {
      const float d = to_float(xr[j]) - mean;
      v += d * d;
    }
    const float rstd = math::norm_rstd(warp_sum(v), static_cast<float>(channels), eps);
    if constexpr (kModulate) {
      const int64_t b = row / tokens;
      const T* sh = shift + b * mod_stride;
      const T* sc = scale + b * mod_stride;
      for (int64_t j = lane; j < channels; j += 32)
        yr[j] = from_float<T>(
            math::modulate(math::normalize(to_float(xr[j]), mean, rstd), to_float(sh[j]), to_float(sc[j])));
    } else {
      for (int64_t j = lane; j < channels; j += 32) {
        float o = math::normalize(to_float(xr[j]), mean, rstd);
        if (weight) o *= to_float(weight[j]);
        if (bias) o += to_float(bias[j]);
        yr[j] = from_float<T>(o);
      }
    }
  }
}

template <bool kModulate>
void launch(const void* x, const void* weight, const void* bias, const void* shift, const void* scale,
            int64_t mod_stride, void* y, int64_t rows, int64_t tokens, int64_t channels, float eps, DType dtype) {
  if (rows <= 0 || channels <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_kernel<T, kModulate><<<grid_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<const T*>(shift), static_cast<const T*>(scale), mod_stride, static_cast<T*>(y), rows, tokens,
        channels, eps);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void layer_norm(const void* x, const void* weight, const void* bias, void* y, int64_t rows, int64_t channels,
                float eps, DType dtype) {
  launch<false>(x, weight, bias, nullptr, nullptr, 0, y, rows, 1, channels, eps, dtype);
}

void layer_norm_modulate(const void* x, const void* shift, const void* scale, int64_t mod_stride, void* y,
                         int64_t batch, int64_t tokens, int64_t channels, float eps, DType dtype) {
  if (!shift || !scale) throw std::invalid_argument("layer_norm_modulate: shift and scale are required");
  launch<true>(x, nullptr, nullptr, shift, scale, mod_stride, y, batch * tokens, tokens, channels, eps, dtype);
}

}  // namespace ditgen::cuda
