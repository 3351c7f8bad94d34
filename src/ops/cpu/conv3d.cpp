// conv3d on the CPU: oneDNN's 3-D convolution (onednn_conv.h), whose
// arithmetic is the weight's dtype as for conv2d: float32, or bfloat16 (the
// input rounded, float32 sums). Arguments are checked by ops::conv3d.
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/onednn_conv.h"

namespace ditgen::ops::cpu {

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding, int64_t slab_bytes) {
  Conv3dShape s;
  s.batch = x.dim(0), s.in_channels = x.dim(1), s.out_channels = w.dim(0);
  s.in = {x.dim(2), x.dim(3), x.dim(4)};
  s.kernel = {w.dim(2), w.dim(3), w.dim(4)};
  s.stride = stride;
  s.padding = padding;
  Tensor out = Tensor::empty({s.batch, s.out_channels, s.out(0), s.out(1), s.out(2)});
  if (out.numel() == 0) return out;
  onednn_conv3d(s, x.data(), w.raw(), w.dtype(), bias ? bias->data() : nullptr, out.data(), slab_bytes);
  return out;
}

}  // namespace ditgen::ops::cpu
