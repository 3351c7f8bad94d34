// The causal Conv3d of the video VAEs (WanCausalConv3d,
// CogVideoXCausalConv3d): kernel 3 in time, run over a video decoded a
// chunk at a time. Such a conv sees its whole input stream causally padded
// by two frames: each causal conv has a two-frame slot in the decode's
// CausalCache, every call builds [slot | chunk] along time in the level's
// staging buffer (ops::copy_rows), keeps the last two frames of that input
// in the slot, and runs ops::conv3d with time padding 0 and "same" spatial
// zero padding. Before a video's first chunk the families differ
// (CausalPad): Wan's slots start as zeros, CogVideoX's first chunk repeats
// its first frame. The cache's call protocol (begin, slot allocation, end)
// is the decoder's (models/vae_decoder_parts.h).
// CausalTimeDownsample is the encoder's strided variant (Wan's
// "downsample3d" time conv), on the same cache.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/conv.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// What a causal conv puts in front of a video's first chunk in time (from
// the second chunk on, the last two frames of its previous input do).
enum class CausalPad {
  kZeros,       // two zero frames (WanCausalConv3d: its cache starts as zeros)
  kFirstFrame,  // the chunk's first frame, twice (CogVideoXCausalConv3d, pad_mode "first")
};

// The causal convs' state over one video's decode. A decode call takes the
// slots in decoder order, one per causal conv.
struct CausalCache {
  std::vector<Tensor> frames;  // one (1, Cin, 2, H, W) slot per causal conv, in decoder order, in the convs' dtype
  size_t next = 0;             // the slot of the current call's next causal conv
  bool started = false;        // a call has completed (before that, `pad` decides the padding)
  CausalPad pad = CausalPad::kZeros;
  int64_t h = 0, w = 0;  // the latent grid of the first call (every later one must match)
  // The [cache | chunk] input of the current level's causal convs: one
  // buffer per level, reused by each conv there, released by the decoder at
  // the level's end (so the caching allocator sees one size of activation
  // per level).
  Tensor staging;
};

class CausalConv3d {
 public:
  // Kernel (3, k, k): the time axis causal, the spatial ones padded k / 2.
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in, std::array<int64_t, 3> kernel) {
    return Conv3d::tensors(prefix, out, in, kernel);
  }
  static CausalConv3d load(const io::WeightStore& weights, const std::string& prefix, int64_t out, int64_t in,
                           std::array<int64_t, 3> kernel, const Placement& place) {
    return {Conv3d::load(weights, prefix, out, in, kernel, place)};
  }

  // x (1, Cin, T, H, W), consumed, through the conv on the call's next slot
  // of `cache`: [two padding frames | x] along time in cache.staging (grown
  // when too small), the padding being the slot's two frames or, on a
  // video's first call under CausalPad::kFirstFrame, x's first frame twice;
  // the slot then keeps the last two frames of that input. -> (1, Cout, T,
  // H', W'). Profiled as vae.conv3d.
  Tensor operator()(Tensor x, CausalCache& cache, const Placement& place) const;
  int64_t in_channels() const { return conv.in_channels(); }

  Conv3d conv;  // (Cout, Cin, 3, k, k)
};

// The time conv of Wan's "downsample3d" (WanResample in an encoder):
// kernel (3, 1, 1), stride 2 in time, no padding, over [the previous
// chunk's last frame | chunk]. A video's first chunk (one frame) passes
// through unchanged. It takes one slot of the cache (allocated as every
// slot, two frames; the second holds the last frame of the previous
// chunk). With the encoder's chunks (1, then 2k frames at its level),
// 2k frames become k.
class CausalTimeDownsample {
 public:
  static TensorDecls tensors(const std::string& prefix, int64_t channels) {
    return Conv3d::tensors(prefix, channels, channels, {3, 1, 1});
  }
  static CausalTimeDownsample load(const io::WeightStore& weights, const std::string& prefix, int64_t channels,
                                   const Placement& place) {
    return {Conv3d::load(weights, prefix, channels, channels, {3, 1, 1}, place)};
  }
  // x (1, C, T, H, W), consumed -> (1, C, T, H, W) on a cache's first call
  // (not started), (1, C, T / 2, H, W) after (T even). Profiled as
  // vae.conv3d.
  Tensor operator()(Tensor x, CausalCache& cache, const Placement& place) const;
  int64_t in_channels() const { return conv.in_channels(); }

  Conv3d conv;  // (C, C, 3, 1, 1)
};

}  // namespace ditgen::models::nn
