// CausalConv3d's call: [padding | chunk] built in the cache's staging
// buffer, the slot updated, one ops::conv3d with time padding 0.
#include "models/nn/causal_conv3d.h"

#include <stdexcept>
#include <utility>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

Tensor CausalConv3d::operator()(Tensor x, CausalCache& cache, const Placement& place) const {
  profile::ScopedTimer t("vae.conv3d");
  if (cache.next >= cache.frames.size()) throw std::logic_error("causal conv: more causal convs than cache slots");
  Tensor& slot = cache.frames[cache.next++];
  const int64_t ch = x.dim(1), frames = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  if (slot.shape() != Shape{1, ch, 2, h, w})
    throw std::logic_error("causal conv: cache slot " + shape_str(slot.shape()) + " for a conv input " +
                           shape_str(x.shape()));
  // [padding | chunk] along time, in the level's staging buffer.
  const int64_t in_frames = 2 + frames, need = ch * in_frames * hw;
  if (!cache.staging.defined() || cache.staging.numel() < need) {
    cache.staging = Tensor();
    cache.staging = place.empty({need});
  }
  Tensor in = cache.staging.slice0(0, need).reshape({1, ch, in_frames, h, w});
  if (cache.started || cache.pad == CausalPad::kZeros) {
    ops::copy_rows(slot, 0, 2 * hw, in, 0, in_frames * hw, ch, 2 * hw);
  } else {  // a first chunk under kFirstFrame: its first frame, twice
    for (int64_t f = 0; f < 2; ++f) ops::copy_rows(x, 0, frames * hw, in, f * hw, in_frames * hw, ch, hw);
  }
  ops::copy_rows(x, 0, frames * hw, in, 2 * hw, in_frames * hw, ch, frames * hw);
  x = Tensor();
  ops::copy_rows(in, frames * hw, in_frames * hw, slot, 0, 2 * hw, ch, 2 * hw);  // the last two input frames
  const int64_t spatial_pad = conv.weight.dim(3) / 2;
  return conv(in, {0, spatial_pad, spatial_pad});
}

}  // namespace ditgen::models::nn
