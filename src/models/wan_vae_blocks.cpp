// WanMidBlock (models/wan_vae_blocks.h): the attention runs per frame on
// the frames as a batch of images (T, C, H, W), one copy_rows per frame
// each way (none for a one-frame chunk).
#include "models/wan_vae_blocks.h"

#include <utility>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

std::string resnet(const std::string& prefix, int r) { return prefix + "resnets." + std::to_string(r) + "."; }
std::string attention_block(const std::string& prefix) { return prefix + "attentions.0."; }
std::string attention_norm(const std::string& prefix) { return attention_block(prefix) + "norm."; }

// [1, C, T, H, W] <-> [T, C, H, W] (frames as a batch of images, for the
// per-frame attention): one copy_rows per frame, none when T == 1.
Tensor frames_to_batch(const Tensor& x, const Placement& place) {
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  if (t == 1) return x.reshape({1, c, h, w});
  Tensor out = place.empty({t, c, h, w});
  for (int64_t f = 0; f < t; ++f) ops::copy_rows(x, f * hw, t * hw, out, f * c * hw, hw, c, hw);
  return out;
}

Tensor batch_to_frames(const Tensor& x, const Placement& place) {
  const int64_t t = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), hw = h * w;
  if (t == 1) return x.reshape({1, c, 1, h, w});
  Tensor out = place.empty({1, c, t, h, w});
  for (int64_t f = 0; f < t; ++f) ops::copy_rows(x, f * c * hw, hw, out, f * hw, t * hw, c, hw);
  return out;
}

}  // namespace

nn::TensorDecls WanMidBlock::tensors(const std::string& prefix, int64_t c) {
  nn::TensorDecls t = nn::WanResidualBlock::tensors(resnet(prefix, 0), c, c);
  nn::append(t, nn::ChannelRmsNorm::tensors(attention_norm(prefix), c, 2));
  nn::append(t, nn::PixelAttention::fused_tensors(attention_block(prefix), c));
  nn::append(t, nn::WanResidualBlock::tensors(resnet(prefix, 1), c, c));
  return t;
}

WanMidBlock WanMidBlock::load(const io::WeightStore& w, const std::string& prefix, int64_t c,
                              const Placement& place) {
  WanMidBlock m;
  m.place_ = place;
  m.resnet0_ = nn::WanResidualBlock::load(w, resnet(prefix, 0), c, c, place);
  m.attn_norm_ = nn::ChannelRmsNorm::load(w, attention_norm(prefix), c, 2, place);
  m.attn_ = nn::PixelAttention::load_fused(w, attention_block(prefix), c, place);
  m.resnet1_ = nn::WanResidualBlock::load(w, resnet(prefix, 1), c, c, place);
  return m;
}

Tensor WanMidBlock::operator()(Tensor x, nn::CausalCache& cache) const {
  x = resnet0_(std::move(x), cache, place_);
  x = attention(std::move(x));
  return resnet1_(std::move(x), cache, place_);
}

Tensor WanMidBlock::attention(Tensor x) const {
  profile::ScopedTimer t("vae.attention");
  Tensor normed = frames_to_batch(attn_norm_(x), place_);
  Tensor out = x.dim(2) == 1 ? x.clone().reshape(normed.shape()) : frames_to_batch(x, place_);
  x = Tensor();
  attn_.add_to(std::move(normed), out);
  return batch_to_frames(out, place_);
}

}  // namespace ditgen::models
