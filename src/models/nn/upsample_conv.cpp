// nn/upsample_conv.h: the 3x3 weight's taps summed into the four phases'
// 2x2 taps in float32 at load, then placed in the compute dtype.
#include "models/nn/upsample_conv.h"

#include "kernels/math/upsample_phases.h"
#include "ops/ops.h"

namespace ditgen::models::nn {

TensorDecls UpsampleConv2d::tensors(const std::string& prefix, int64_t out, int64_t in) {
  return {{prefix + "weight", {out, in, 3, 3}}, {prefix + "bias", {out}}};
}

Tensor UpsampleConv2d::phase_weight(const Tensor& w) {
  const int64_t out = w.dim(0), in = w.dim(1);
  Tensor p = Tensor::zeros({4 * out, in, 2, 2});  // (4 out, in, 2, 2)
  for (int py = 0; py < 2; ++py)
    for (int px = 0; px < 2; ++px)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
          float* dst = p.data() + (((2 * py + px) * out + o) * in + i) * 4;
          const float* src = w.data() + (o * in + i) * 9;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx)
              dst[math::upsample_phase_tap(py, ky) * 2 + math::upsample_phase_tap(px, kx)] += src[ky * 3 + kx];
        }
  return p;
}

UpsampleConv2d UpsampleConv2d::load(const io::WeightStore& w, const std::string& prefix, int64_t out, int64_t in,
                                    const Placement& place) {
  const TensorDecls t = tensors(prefix, out, in);
  UpsampleConv2d c;
  c.weight = place.conv(phase_weight(load_declared(w, t[0]).to(Device::kCPU, DType::kF32)));
  const Tensor bias = load_declared(w, t[1]).to(Device::kCPU, DType::kF32);
  Tensor bias4 = Tensor::empty({4 * out});
  for (int64_t k = 0; k < 4 * out; ++k) bias4[k] = bias[k % out];
  c.bias = place.put(bias4);
  return c;
}

Tensor UpsampleConv2d::operator()(const Tensor& x) const {
  return ops::interleave_upsample_phases(ops::conv2d(x, weight, &bias, 1, 1));
}

}  // namespace ditgen::models::nn
