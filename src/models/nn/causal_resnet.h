// The residual blocks of the causal video VAEs, built of nn/norm.h,
// nn/conv.h and nn/causal_conv3d.h: norm + SiLU, causal 3x3x3 conv, norm +
// SiLU, causal 3x3x3 conv, plus the input, through a 1x1x1 conv_shortcut
// when the channel count changes (dropout 0, no time embedding). Their two
// causal convs take the next two slots of the decode's CausalCache; the
// decoder lists them (causal_inputs) in the order they run.
//   WanResidualBlock        WanRMS_norm (nn::ChannelRmsNorm) before each conv;
//                           names norm1.gamma, conv1., norm2.gamma, conv2.,
//                           conv_shortcut.
//   CogVideoXResnetBlock3D  a CogVideoXSpatialNorm3D before each conv: the
//                           feature map's GroupNorm (eps 1e-6, affine) times
//                           conv_y(zq) plus conv_b(zq), zq the chunk's
//                           latents nearest-resized to the map's frames and
//                           pixels (the first frame on its own when the map
//                           has an odd frame count > 1). A 1x1x1 conv
//                           commutes with a nearest resize, so conv_y and
//                           conv_b run on the latent grid and their outputs
//                           are resized: the same numbers at 1/64 of the
//                           work at the last level. Names norm1. (norm_layer,
//                           conv_y.conv, conv_b.conv), conv1.conv., norm2.,
//                           conv2.conv., conv_shortcut.
// Profiled as vae.rms_norm / vae.group_norm, vae.spatial_norm, vae.conv3d,
// vae.residual.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/causal_conv3d.h"
#include "models/nn/conv.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class WanResidualBlock {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t in, int64_t out);
  static WanResidualBlock load(const io::WeightStore& weights, const std::string& prefix, int64_t in, int64_t out,
                               const Placement& place);
  // x (1, Cin, T, H, W) -> (1, Cout, T, H, W) through two slots of `cache`.
  Tensor operator()(Tensor x, CausalCache& cache, const Placement& place) const;
  // The input channels of its causal convs, in the order they run.
  std::vector<int64_t> causal_inputs() const { return {conv1_.in_channels(), conv2_.in_channels()}; }

 private:
  ChannelRmsNorm norm1_;  // gamma (Cin, 1, 1, 1)
  CausalConv3d conv1_;    // (Cout, Cin, 3, 3, 3)
  ChannelRmsNorm norm2_;  // gamma (Cout, 1, 1, 1)
  CausalConv3d conv2_;    // (Cout, Cout, 3, 3, 3)
  Conv3d shortcut_;       // (Cout, Cin, 1, 1, 1); undefined when Cin == Cout
};

// CogVideoXSpatialNorm3D, with the SiLU that follows every one in the decoder.
class CogVideoXSpatialNorm {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t channels, int64_t latent_channels);
  static CogVideoXSpatialNorm load(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                                   int64_t latent_channels, int64_t groups, const Placement& place);
  // SiLU(GroupNorm(f) * conv_y(zq) + conv_b(zq)), f (1, C, T, H, W), zq (1,
  // latent_channels, t, h, w) with H, W multiples of h, w.
  Tensor operator()(const Tensor& f, const Tensor& zq, const Placement& place) const;

 private:
  GroupNorm norm_;  // norm_layer: (C), (C)
  Conv3d conv_y_;   // (C, latent_channels, 1, 1, 1)
  Conv3d conv_b_;   // (C, latent_channels, 1, 1, 1)
};

class CogVideoXResnetBlock3D {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t in, int64_t out, int64_t latent_channels);
  static CogVideoXResnetBlock3D load(const io::WeightStore& weights, const std::string& prefix, int64_t in,
                                     int64_t out, int64_t latent_channels, int64_t groups, const Placement& place);
  // x (1, Cin, T, H, W) -> (1, Cout, T, H, W), its norms conditioned on the
  // chunk's latents zq, through two slots of `cache`.
  Tensor operator()(Tensor x, const Tensor& zq, CausalCache& cache, const Placement& place) const;
  std::vector<int64_t> causal_inputs() const { return {conv1_.in_channels(), conv2_.in_channels()}; }

 private:
  CogVideoXSpatialNorm norm1_;  // over Cin
  CausalConv3d conv1_;          // (Cout, Cin, 3, 3, 3)
  CogVideoXSpatialNorm norm2_;  // over Cout
  CausalConv3d conv2_;          // (Cout, Cout, 3, 3, 3)
  Conv3d shortcut_;             // (Cout, Cin, 1, 1, 1); undefined when Cin == Cout
};

// x (1, C, T, h, w) with its frames resized to `source.size()` by `source`
// (the input frame of each output frame) and its pixels repeated `factor`
// x factor times: nearest interpolation, as a copy on `place` (none when
// both are the identity). The spatial norm's resize of zq, and
// CogVideoXUpsample3D's of its input.
Tensor resize_frames_nearest(const Tensor& x, const std::vector<int64_t>& source, int64_t factor,
                             const Placement& place);

}  // namespace ditgen::models::nn
