// CausalConv3d's call: [padding | chunk] built in the cache's staging
// buffer, the slot updated, one ops::conv3d with time padding 0; the
// encoder's strided time conv the same with one frame of context.
#include "models/nn/causal_conv3d.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

// The call's next slot of `cache`, which must be (1, C, 2, H, W) for an input x (1, C, T, H, W).
Tensor& next_slot(CausalCache& cache, const Tensor& x, const char* who) {
  if (cache.next >= cache.frames.size())
    throw std::logic_error(std::string(who) + ": more causal convs than cache slots");
  Tensor& slot = cache.frames[cache.next++];
  if (slot.shape() != Shape{1, x.dim(1), 2, x.dim(3), x.dim(4)})
    throw std::logic_error(std::string(who) + ": cache slot " + shape_str(slot.shape()) + " for a conv input " +
                           shape_str(x.shape()));
  return slot;
}

// A (1, C, frames, H, W) view of the front of cache.staging, grown when too small.
Tensor staged_input(CausalCache& cache, int64_t channels, int64_t frames, int64_t h, int64_t w,
                    const Placement& place) {
  const int64_t need = channels * frames * h * w;
  if (!cache.staging.defined() || cache.staging.numel() < need) {
    cache.staging = Tensor();
    cache.staging = place.empty({need});
  }
  return cache.staging.slice0(0, need).reshape({1, channels, frames, h, w});
}

}  // namespace

Tensor CausalConv3d::operator()(Tensor x, CausalCache& cache, const Placement& place) const {
  profile::ScopedTimer t("vae.conv3d");
  Tensor& slot = next_slot(cache, x, "causal conv");
  const int64_t ch = x.dim(1), frames = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  // [padding | chunk] along time, in the level's staging buffer.
  const int64_t in_frames = 2 + frames;
  Tensor in = staged_input(cache, ch, in_frames, h, w, place);
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

Tensor CausalTimeDownsample::operator()(Tensor x, CausalCache& cache, const Placement& place) const {
  profile::ScopedTimer t("vae.conv3d");
  Tensor& slot = next_slot(cache, x, "causal time downsample");
  const int64_t ch = x.dim(1), frames = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  auto keep_last_frame = [&](const Tensor& src, int64_t src_frames) {  // into the slot's second frame
    ops::copy_rows(src, (src_frames - 1) * hw, src_frames * hw, slot, hw, 2 * hw, ch, hw);
  };
  if (!cache.started) {  // diffusers: the first chunk is cached whole and passes unchanged
    keep_last_frame(x, frames);
    return x;
  }
  if (frames % 2 != 0)
    throw std::logic_error("causal time downsample: " + std::to_string(frames) + " frames after the first chunk");
  Tensor in = staged_input(cache, ch, 1 + frames, h, w, place);
  ops::copy_rows(slot, hw, 2 * hw, in, 0, (1 + frames) * hw, ch, hw);
  ops::copy_rows(x, 0, frames * hw, in, hw, (1 + frames) * hw, ch, frames * hw);
  keep_last_frame(x, frames);
  x = Tensor();
  return ops::conv3d(in, conv.weight, &conv.bias, {2, 1, 1}, {0, 0, 0});
}

}  // namespace ditgen::models::nn
