// Normalisation layers that hold weights, as torch and diffusers store them,
// each declaring its tensors (nn/tensor_decl.h) and loading exactly those:
//   GroupNorm       nn.GroupNorm with affine over (N, C, ...): weight and
//                   bias (C), its group count and eps; optionally fused with
//                   the SiLU that follows it (ops::group_norm).
//   LayerNorm       nn.LayerNorm with affine over the last axis: weight and
//                   bias (D). Where a modulation follows it, a family may
//                   hold its affine on the host and fold it in instead
//                   (load with a CPU placement).
//   RmsNorm         T5's LayerNorm (T5LayerNorm: x / rms(x) * weight, no
//                   mean, no bias) over the last axis.
//   ChannelRmsNorm  Wan's VAE norm (WanRMS_norm): over the channel axis of
//                   (N, C, ...), x / ||x||_C * sqrt(C) * gamma, gamma stored
//                   (C, 1, 1[, 1]); optionally fused with a SiLU.
// Weights go through Placement::put (float32 on the CPU, the compute dtype
// on CUDA). Names: `prefix` + "weight" / "bias" ("gamma" for ChannelRmsNorm).
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class GroupNorm {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t channels);
  static GroupNorm load(const io::WeightStore& weights, const std::string& prefix, int64_t channels, int64_t groups,
                        float eps, const Placement& place);
  // x (N, C, ...) normalised per group, times weight plus bias; then SiLU
  // when `silu`.
  Tensor operator()(const Tensor& x, bool silu = false) const;

  Tensor weight;  // (C)
  Tensor bias;    // (C)

 private:
  int64_t groups_ = 1;
  float eps_ = 1e-6f;
};

class LayerNorm {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t dim);
  static LayerNorm load(const io::WeightStore& weights, const std::string& prefix, int64_t dim, float eps,
                        const Placement& place);
  // x (..., D) -> LN(x) * weight + bias.
  Tensor operator()(const Tensor& x) const;

  Tensor weight;  // (D)
  Tensor bias;    // (D)

 private:
  float eps_ = 1e-5f;
};

class RmsNorm {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t dim);
  static RmsNorm load(const io::WeightStore& weights, const std::string& prefix, int64_t dim, float eps,
                      const Placement& place);
  // x (..., D) -> x / rms(x) * weight.
  Tensor operator()(const Tensor& x) const;

  Tensor weight;  // (D)

 private:
  float eps_ = 1e-6f;
};

class ChannelRmsNorm {
 public:
  // gamma (C) followed by `trailing_ones` axes of 1, as stored: (C, 1, 1, 1)
  // for a 3-D feature map, (C, 1, 1) for a 2-D one.
  static TensorDecls tensors(const std::string& prefix, int64_t channels, int trailing_ones);
  static ChannelRmsNorm load(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                             int trailing_ones, const Placement& place);
  // x (N, C, ...) normalised over C, times gamma; then SiLU when `silu`.
  Tensor operator()(const Tensor& x, bool silu = false) const;

  Tensor gamma;  // (C, 1, ...) as stored
};

}  // namespace ditgen::models::nn
