// The causal residual blocks: their parts' names written once (Parts) for
// declarations and load; CogVideoX's spatial norm resizes zq by aten's
// nearest rule (nearest_source) after its 1x1x1 convs.
#include "models/nn/causal_resnet.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

// The GroupNorm eps of CogVideoXSpatialNorm3D (fixed in diffusers, whatever
// the config's norm_eps).
constexpr float kSpatialNormEps = 1e-6f;

// Where a residual block's parts are stored under its prefix; CogVideoX's
// causal convs hold their conv one level down ("conv1.conv.").
struct Parts {
  std::string norm1, conv1, norm2, conv2, shortcut;
  Parts(const std::string& p, const std::string& conv_suffix)
      : norm1(p + "norm1."),
        conv1(p + "conv1." + conv_suffix),
        norm2(p + "norm2."),
        conv2(p + "conv2." + conv_suffix),
        shortcut(p + "conv_shortcut.") {}
};

constexpr std::array<int64_t, 3> k3x3x3 = {3, 3, 3}, k1x1x1 = {1, 1, 1};

// The end of a residual block: h += x, through `shortcut` when it is defined.
void add_residual(Tensor& h, const Tensor& x, const Conv3d& shortcut) {
  profile::ScopedTimer t("vae.residual");
  if (shortcut.defined())
    ops::add_(h, shortcut(x));
  else
    ops::add_(h, x);
}

// The source index of output index `dst` when `in` entries are resized to
// `out` (F.interpolate mode "nearest" with an output size: aten's
// nearest_idx): the identity or a halving for the common cases, else
// floor(dst * (in / out)) in float, clamped.
int64_t nearest_source(int64_t dst, int64_t in, int64_t out) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

}  // namespace

// ---- WanResidualBlock ---------------------------------------------------------------

TensorDecls WanResidualBlock::tensors(const std::string& prefix, int64_t in, int64_t out) {
  const Parts p(prefix, "");
  TensorDecls t = ChannelRmsNorm::tensors(p.norm1, in, 3);
  append(t, CausalConv3d::tensors(p.conv1, out, in, k3x3x3));
  append(t, ChannelRmsNorm::tensors(p.norm2, out, 3));
  append(t, CausalConv3d::tensors(p.conv2, out, out, k3x3x3));
  if (in != out) append(t, Conv3d::tensors(p.shortcut, out, in, k1x1x1));
  return t;
}

WanResidualBlock WanResidualBlock::load(const io::WeightStore& w, const std::string& prefix, int64_t in, int64_t out,
                                        const Placement& place) {
  const Parts p(prefix, "");
  WanResidualBlock r;
  r.norm1_ = ChannelRmsNorm::load(w, p.norm1, in, 3, place);
  r.conv1_ = CausalConv3d::load(w, p.conv1, out, in, k3x3x3, place);
  r.norm2_ = ChannelRmsNorm::load(w, p.norm2, out, 3, place);
  r.conv2_ = CausalConv3d::load(w, p.conv2, out, out, k3x3x3, place);
  if (in != out) r.shortcut_ = Conv3d::load(w, p.shortcut, out, in, k1x1x1, place);
  return r;
}

Tensor WanResidualBlock::operator()(Tensor x, CausalCache& cache, const Placement& place) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = norm1_(x, true);
  }
  h = conv1_(std::move(h), cache, place);
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = norm2_(h, true);
  }
  h = conv2_(std::move(h), cache, place);
  add_residual(h, x, shortcut_);
  return h;
}

// ---- CogVideoXSpatialNorm -----------------------------------------------------------

TensorDecls CogVideoXSpatialNorm::tensors(const std::string& prefix, int64_t c, int64_t zc) {
  TensorDecls t = GroupNorm::tensors(prefix + "norm_layer.", c);
  append(t, Conv3d::tensors(prefix + "conv_y.conv.", c, zc, k1x1x1));
  append(t, Conv3d::tensors(prefix + "conv_b.conv.", c, zc, k1x1x1));
  return t;
}

CogVideoXSpatialNorm CogVideoXSpatialNorm::load(const io::WeightStore& w, const std::string& prefix, int64_t c,
                                                int64_t zc, int64_t groups, const Placement& place) {
  CogVideoXSpatialNorm n;
  n.norm_ = GroupNorm::load(w, prefix + "norm_layer.", c, groups, kSpatialNormEps, place);
  n.conv_y_ = Conv3d::load(w, prefix + "conv_y.conv.", c, zc, k1x1x1, place);
  n.conv_b_ = Conv3d::load(w, prefix + "conv_b.conv.", c, zc, k1x1x1, place);
  return n;
}

Tensor CogVideoXSpatialNorm::operator()(const Tensor& f, const Tensor& zq, const Placement& place) const {
  const int64_t frames = f.dim(2), zf = zq.dim(2), factor = f.dim(3) / zq.dim(3);
  if (f.dim(3) != zq.dim(3) * factor || f.dim(4) != zq.dim(4) * factor)
    throw std::logic_error("CogVideoX VAE: spatial norm over " + shape_str(f.shape()) + " with zq " +
                           shape_str(zq.shape()));
  // zq's frame for each of f's: an odd count > 1 maps its first frame to zq's
  // first and resizes the rest on their own.
  std::vector<int64_t> source(static_cast<size_t>(frames));
  if (frames > 1 && frames % 2 == 1) {
    if (zf < 2) throw std::logic_error("CogVideoX VAE: spatial norm over an odd frame count from one latent frame");
    for (int64_t t = 1; t < frames; ++t) source[static_cast<size_t>(t)] = 1 + nearest_source(t - 1, zf - 1, frames - 1);
  } else {
    for (int64_t t = 0; t < frames; ++t) source[static_cast<size_t>(t)] = nearest_source(t, zf, frames);
  }
  Tensor out;
  {
    profile::ScopedTimer t("vae.group_norm");
    out = norm_(f);
  }
  profile::ScopedTimer t("vae.spatial_norm");
  ops::mul_(out, resize_frames_nearest(conv_y_(zq), source, factor, place));
  ops::add_(out, resize_frames_nearest(conv_b_(zq), source, factor, place));
  ops::silu_(out);
  return out;
}

// ---- CogVideoXResnetBlock3D ---------------------------------------------------------

TensorDecls CogVideoXResnetBlock3D::tensors(const std::string& prefix, int64_t in, int64_t out, int64_t zc) {
  const Parts p(prefix, "conv.");
  TensorDecls t = CogVideoXSpatialNorm::tensors(p.norm1, in, zc);
  append(t, CausalConv3d::tensors(p.conv1, out, in, k3x3x3));
  append(t, CogVideoXSpatialNorm::tensors(p.norm2, out, zc));
  append(t, CausalConv3d::tensors(p.conv2, out, out, k3x3x3));
  if (in != out) append(t, Conv3d::tensors(p.shortcut, out, in, k1x1x1));
  return t;
}

CogVideoXResnetBlock3D CogVideoXResnetBlock3D::load(const io::WeightStore& w, const std::string& prefix, int64_t in,
                                                    int64_t out, int64_t zc, int64_t groups, const Placement& place) {
  const Parts p(prefix, "conv.");
  CogVideoXResnetBlock3D r;
  r.norm1_ = CogVideoXSpatialNorm::load(w, p.norm1, in, zc, groups, place);
  r.conv1_ = CausalConv3d::load(w, p.conv1, out, in, k3x3x3, place);
  r.norm2_ = CogVideoXSpatialNorm::load(w, p.norm2, out, zc, groups, place);
  r.conv2_ = CausalConv3d::load(w, p.conv2, out, out, k3x3x3, place);
  if (in != out) r.shortcut_ = Conv3d::load(w, p.shortcut, out, in, k1x1x1, place);
  return r;
}

Tensor CogVideoXResnetBlock3D::operator()(Tensor x, const Tensor& zq, CausalCache& cache,
                                          const Placement& place) const {
  Tensor h = norm1_(x, zq, place);
  // A block that changes the channel count changes the activations' size
  // (CogVideoX-2b's last up block: 256 to 128 channels at full resolution).
  // Its input goes as soon as the shortcut has read it, and the host blocks
  // sized for it go back to the system before conv1 (the input's, the
  // norm's resized zq) and after it (the norm's, and the staging buffer
  // grown for the input's channels): the caching allocator never splits a
  // block, so none could hold a narrower activation, and kept they were
  // 2.3 GiB of a bfloat16 decode at 9 x 256 x 256.
  const bool resizes = shortcut_.defined();
  if (resizes) {
    {
      profile::ScopedTimer t("vae.residual");
      x = shortcut_(x);
    }
    device_memory::release_cached_host();
  }
  h = conv1_(std::move(h), cache, place);
  if (resizes) {
    cache.staging = Tensor();
    device_memory::release_cached_host();
  }
  h = norm2_(h, zq, place);
  h = conv2_(std::move(h), cache, place);
  profile::ScopedTimer t("vae.residual");
  ops::add_(h, x);  // x: the shortcut's output when the channels change
  return h;
}

Tensor resize_frames_nearest(const Tensor& x, const std::vector<int64_t>& source, int64_t factor,
                             const Placement& place) {
  const int64_t c = x.dim(1), t_in = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  const int64_t t = static_cast<int64_t>(source.size());
  bool identity = t == t_in;
  for (int64_t f = 0; identity && f < t; ++f) identity = source[static_cast<size_t>(f)] == f;
  Tensor frames = x;
  if (!identity) {
    frames = place.empty({1, c, t, h, w});
    for (int64_t f = 0; f < t; ++f)
      ops::copy_rows(x, source[static_cast<size_t>(f)] * hw, t_in * hw, frames, f * hw, t * hw, c, hw);
  }
  if (factor == 1) return frames;
  // Channels and frames as one axis of images: each frame's pixels repeated.
  return ops::upsample_nearest(frames.reshape({1, c * t, h, w}), factor).reshape({1, c, t, h * factor, w * factor});
}

}  // namespace ditgen::models::nn
