// The upsamplers of the VAE decoders: nearest x2, then a 3x3 convolution
// (stride 1, zero padding 1), diffusers' Upsample2D (AutoencoderKL) and
// WanResample's upsample2d / upsample3d spatial part. Declared and read as
// the 3x3 weight torch stores; held as the equivalent four-phase 2x2
// weight (kernels/math/upsample_phases.h), summed at load in float32, so a
// call runs one 2x2 convolution of the small image (4/9 of the 3x3's
// multiply-adds on the upsampled one, and no upsampled copy) and an
// interleave: the same sums, in another order.
// Names: `prefix` + "weight" / "bias", as nn::Conv2d.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class UpsampleConv2d {
 public:
  // The 3x3 convolution's tensors: weight (out, in, 3, 3), bias (out).
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in);
  static UpsampleConv2d load(const io::WeightStore& weights, const std::string& prefix, int64_t out, int64_t in,
                             const Placement& place);
  // The transform alone (for tests): w (out, in, 3, 3), float32 -> (4 out,
  // in, 2, 2), float32, phase (py, px) in output rows (2 py + px) * out.
  static Tensor phase_weight(const Tensor& w);
  // x (B, in, H, W) -> conv3x3(upsample_nearest(x, 2)) (B, out, 2H, 2W).
  Tensor operator()(const Tensor& x) const;
  bool defined() const { return weight.defined(); }
  int64_t out_channels() const { return weight.dim(0) / 4; }

  Tensor weight;  // (4 out, in, 2, 2), in the compute dtype
  Tensor bias;    // (4 out): the bias once per phase
};

}  // namespace ditgen::models::nn
