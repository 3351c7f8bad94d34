// diffusers' ResnetBlock2D without a time embedding (the blocks of
// AutoencoderKL's decoder, and of its encoder): GroupNorm + SiLU, 3x3 conv,
// GroupNorm + SiLU, 3x3 conv, plus the input, through a 1x1 conv_shortcut
// when the channel count changes (output_scale_factor 1, dropout 0). Every
// GroupNorm has the block's groups and eps. Built of nn/norm.h and
// nn/conv.h; profiled as vae.group_norm, vae.conv3x3, vae.residual.
// Names under `prefix` ("decoder.up_blocks.0.resnets.1."): norm1, conv1,
// norm2, conv2, conv_shortcut.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/conv.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

struct ResnetDims {
  int64_t in = 0, out = 0;  // channels in and out
  int64_t groups = 32;      // of every GroupNorm
  float eps = 1e-6f;
};

class ResnetBlock2D {
 public:
  static TensorDecls tensors(const std::string& prefix, const ResnetDims& dims);
  static ResnetBlock2D load(const io::WeightStore& weights, const std::string& prefix, const ResnetDims& dims,
                            const Placement& place);
  // x (B, Cin, H, W) -> (B, Cout, H, W).
  Tensor operator()(const Tensor& x) const;

 private:
  GroupNorm norm1_;   // (Cin)
  Conv2d conv1_;      // (Cout, Cin, 3, 3)
  GroupNorm norm2_;   // (Cout)
  Conv2d conv2_;      // (Cout, Cout, 3, 3)
  Conv2d shortcut_;   // (Cout, Cin, 1, 1); undefined when Cin == Cout
};

}  // namespace ditgen::models::nn
