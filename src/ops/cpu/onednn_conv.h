// The CPU's 2-D and 3-D convolutions: oneDNN's convolution_forward (brgconv), in
// float32 or in bfloat16 with float32 output. Measured on this project's
// machine (2 threads, the SD VAE decoder's 3x3 shapes, NCHW in and out
// including oneDNN's reorders to its blocked layouts): float32 196-220
// GFLOP/s against 170-200 for the im2col + GEMM it replaced, bfloat16
// 360-430 (README, CPU performance).
//
// ditgen keeps NCHW / NCDHW tensors; each call reorders the input (converting it to
// bfloat16 for a bfloat16 weight), the weight and the output between NCHW
// and the blocked layouts the primitive chose, in reused thread-local
// buffers; a large 3-D one does so a time slab at a time (kConvSlabBytes). The weight reorder is the small one (9.4 MB for a 512x512 3x3
// float32 weight against 9.7 GFLOP of convolution at 64x64).
// Primitives and reorders are built once per shape and cached.
#pragma once
#include <array>
#include <cstdint>

#include "vocab/dtype.h"

namespace ditgen::ops::cpu {

struct ConvShape {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0, stride = 1, padding = 0;
  int64_t out_height() const { return (height + 2 * padding - kernel_h) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel_w) / stride + 1; }
};

// y (B, Cout, Ho, Wo) = conv(x (B, Cin, H, W), w (Cout, Cin, kh, kw)) + bias,
// zero padding; x, bias, y float32; w float32 or bfloat16 (the arithmetic:
// bfloat16 rounds x, float32 sums). bias may be null.
void onednn_conv2d(const ConvShape& shape, const float* x, const void* w, DType w_dtype, const float* bias, float* y);

// The 3-D form: per-axis (t, h, w) sizes, strides and symmetric zero padding.
struct Conv3dShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  std::array<int64_t, 3> in{}, kernel{}, stride{1, 1, 1}, padding{};
  int64_t out(int axis) const { return (in[axis] + 2 * padding[axis] - kernel[axis]) / stride[axis] + 1; }
};

// The bytes a 3-D convolution's copies in oneDNN's layouts may take (its
// input in the arithmetic's dtype and its float32 output): a larger one runs
// in time slabs. Those copies live in buffers reused by every later call
// and never shrunk, so whole they would hold the largest video
// convolution's input and output for good (CogVideoX's VAE at 9 x 256 x 256:
// 352 MiB and 576 MiB, in a bfloat16 decode whose peak diffusers keeps at
// 3.4 GiB).
constexpr int64_t kConvSlabBytes = int64_t{256} << 20;

// y (B, Cout, To, Ho, Wo) = conv(x (B, Cin, T, H, W), w (Cout, Cin, kt, kh,
// kw)) + bias, dtypes as onednn_conv2d. Without time padding, in slabs of
// output frames (each reading its input frames in place) whose copies fit
// slab_bytes: the same sums, one primitive per slab; the weight is
// reordered once.
void onednn_conv3d(const Conv3dShape& shape, const float* x, const void* w, DType w_dtype, const float* bias,
                   float* y, int64_t slab_bytes = kConvSlabBytes);

}  // namespace ditgen::ops::cpu
