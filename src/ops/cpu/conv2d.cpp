// conv2d on the CPU: argument checks, then oneDNN's convolution
// (onednn_conv.h), whose arithmetic is the weight's dtype as for the GEMMs:
// float32, or bfloat16 (the input rounded, float32 sums).
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/onednn_conv.h"

namespace ditgen::ops::cpu {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding) {
  if (x.ndim() != 4 || w.ndim() != 4)
    throw std::invalid_argument("conv2d: expected x [B, Cin, H, W] and w [Cout, Cin, kh, kw], got " +
                                shape_str(x.shape()) + " and " + shape_str(w.shape()));
  ConvShape s;
  s.batch = x.dim(0), s.in_channels = x.dim(1), s.height = x.dim(2), s.width = x.dim(3);
  s.out_channels = w.dim(0), s.kernel_h = w.dim(2), s.kernel_w = w.dim(3);
  s.stride = stride, s.padding = padding;
  if (w.dim(1) != s.in_channels)
    throw std::invalid_argument("conv2d: x " + shape_str(x.shape()) + " has " + std::to_string(s.in_channels) +
                                " channels but w " + shape_str(w.shape()) + " expects " + std::to_string(w.dim(1)));
  if (bias && bias->numel() != s.out_channels)
    throw std::invalid_argument("conv2d: bias " + shape_str(bias->shape()) + " for " + std::to_string(s.out_channels) +
                                " output channels");
  if (stride < 1 || padding < 0) throw std::invalid_argument("conv2d: stride must be >= 1 and padding >= 0");
  if (s.height + 2 * padding < s.kernel_h || s.width + 2 * padding < s.kernel_w)
    throw std::invalid_argument("conv2d: kernel " + shape_str(w.shape()) + " larger than padded input " +
                                shape_str(x.shape()));
  Tensor out = Tensor::empty({s.batch, s.out_channels, s.out_height(), s.out_width()});  // (B, Cout, Ho, Wo)
  if (out.numel() == 0) return out;
  onednn_conv2d(s, x.data(), w.raw(), w.dtype(), bias ? bias->data() : nullptr, out.data());
  return out;
}

}  // namespace ditgen::ops::cpu
