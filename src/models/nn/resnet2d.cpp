// ResnetBlock2D: its parts' names are written once (Parts), for its
// declarations and its load alike.
#include "models/nn/resnet2d.h"

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

// Where each part is stored, under the block's prefix.
struct Parts {
  std::string norm1, conv1, norm2, conv2, shortcut;
  explicit Parts(const std::string& p)
      : norm1(p + "norm1."), conv1(p + "conv1."), norm2(p + "norm2."), conv2(p + "conv2."), shortcut(p + "conv_shortcut.") {}
};

}  // namespace

TensorDecls ResnetBlock2D::tensors(const std::string& prefix, const ResnetDims& d) {
  const Parts p(prefix);
  TensorDecls t = GroupNorm::tensors(p.norm1, d.in);
  append(t, Conv2d::tensors(p.conv1, d.out, d.in, 3));
  append(t, GroupNorm::tensors(p.norm2, d.out));
  append(t, Conv2d::tensors(p.conv2, d.out, d.out, 3));
  if (d.in != d.out) append(t, Conv2d::tensors(p.shortcut, d.out, d.in, 1));
  return t;
}

ResnetBlock2D ResnetBlock2D::load(const io::WeightStore& w, const std::string& prefix, const ResnetDims& d,
                                  const Placement& place) {
  const Parts p(prefix);
  ResnetBlock2D r;
  r.norm1_ = GroupNorm::load(w, p.norm1, d.in, d.groups, d.eps, place);
  r.conv1_ = Conv2d::load(w, p.conv1, d.out, d.in, 3, place);
  r.norm2_ = GroupNorm::load(w, p.norm2, d.out, d.groups, d.eps, place);
  r.conv2_ = Conv2d::load(w, p.conv2, d.out, d.out, 3, place);
  if (d.in != d.out) r.shortcut_ = Conv2d::load(w, p.shortcut, d.out, d.in, 1, place);
  return r;
}

Tensor ResnetBlock2D::operator()(const Tensor& x) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.group_norm");
    h = norm1_(x, true);
  }
  {
    profile::ScopedTimer t("vae.conv3x3");
    h = conv1_(h);
  }
  {
    profile::ScopedTimer t("vae.group_norm");
    h = norm2_(h, true);
  }
  {
    profile::ScopedTimer t("vae.conv3x3");
    h = conv2_(h);
  }
  profile::ScopedTimer t("vae.residual");
  if (shortcut_.defined())
    ops::add_(h, shortcut_(x));
  else
    ops::add_(h, x);
  return h;  // output_scale_factor is 1 in the decoder
}

}  // namespace ditgen::models::nn
