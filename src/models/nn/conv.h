// Convolutions that hold weights, as torch stores them (weight (Cout, Cin,
// kernel...), bias (Cout)), each declaring its tensors (nn/tensor_decl.h)
// and loading exactly those: the weight through Placement::conv (the
// compute dtype: the CPU convolution's arithmetic), the bias through put;
// file pages released where placing made a copy.
//   Conv2d   NCHW, stride 1 by default, "same" zero padding (kernel / 2).
//   Conv3d   NCDHW, stride 1, the padding per call; optionally a 2-D
//            kernel stored (Cout, Cin, kh, kw) run as (Cout, Cin, 1, kh, kw)
//            on every frame at once (CogVideoX's upsampler).
// A causal Conv3d over a video decoded a chunk at a time is
// nn/causal_conv3d.h.
// Names: `prefix` + "weight" / "bias" ("decoder.conv_in.").
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class Conv2d {
 public:
  // A square `kernel` x kernel convolution of in -> out channels.
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in, int64_t kernel);
  static Conv2d load(const io::WeightStore& weights, const std::string& prefix, int64_t out, int64_t in,
                     int64_t kernel, const Placement& place);
  // x (B, Cin, H, W) -> (B, Cout, H', W') at stride 1, padding kernel / 2.
  Tensor operator()(const Tensor& x) const;
  bool defined() const { return weight.defined(); }

  Tensor weight;  // (Cout, Cin, k, k), in the compute dtype
  Tensor bias;    // (Cout)
};

class Conv3d {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in, std::array<int64_t, 3> kernel);
  static Conv3d load(const io::WeightStore& weights, const std::string& prefix, int64_t out, int64_t in,
                     std::array<int64_t, 3> kernel, const Placement& place);
  // A 2-D kh x kw convolution (stored (Cout, Cin, kh, kw)) held as (Cout,
  // Cin, 1, kh, kw): one conv3d runs it on every frame.
  static TensorDecls tensors_2d(const std::string& prefix, int64_t out, int64_t in, int64_t kernel);
  static Conv3d load_2d(const io::WeightStore& weights, const std::string& prefix, int64_t out, int64_t in,
                        int64_t kernel, const Placement& place);
  // x (1, Cin, T, H, W) with zero padding `pad` (t, h, w), stride 1 ->
  // (1, Cout, T', H', W').
  Tensor operator()(const Tensor& x, std::array<int64_t, 3> pad = {0, 0, 0}) const;
  bool defined() const { return weight.defined(); }
  int64_t in_channels() const { return weight.dim(1); }

  Tensor weight;  // (Cout, Cin, kt, kh, kw), in the compute dtype
  Tensor bias;    // (Cout)
};

}  // namespace ditgen::models::nn
