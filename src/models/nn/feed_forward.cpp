#include "models/nn/feed_forward.h"

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

bool gated(FeedForwardActivation a) { return a == FeedForwardActivation::kGatedGeluTanh; }

}  // namespace

TensorDecls FeedForward::tensors(const std::string& prefix, const FeedForwardDims& d) {
  const int64_t rows = gated(d.activation) ? 2 * d.inner : d.inner;  // a gated one: value, then gate
  TensorDecls t = ColumnParallelLinear::tensors(prefix + "net.0.proj.", rows, d.dim);
  append(t, RowParallelLinear::tensors(prefix + "net.2.", d.dim, d.inner));
  return t;
}

FeedForward FeedForward::load(const io::WeightStore& w, const std::string& prefix, const FeedForwardDims& d,
                              parallel::Communicator* tp, const Placement& place) {
  FeedForward ff;
  ff.activation_ = d.activation;
  ff.proj_in_ = ColumnParallelLinear::load(w, prefix + "net.0.proj.", d.inner, tp, place);
  if (gated(d.activation))  // rows [F, 2F) of the same weight, split over tp like the value's
    ff.gate_ = ColumnParallelLinear::load(w, prefix + "net.0.proj.", d.inner, tp, place, d.inner);
  ff.proj_out_ = RowParallelLinear::load(w, prefix + "net.2.", d.inner, tp, place);
  return ff;
}

Tensor FeedForward::operator()(const Tensor& x) const {
  Tensor hidden;  // (B, P, Fl)
  {
    profile::ScopedTimer t("mlp_in");  // with its GELU, fused on the CPU
    if (gated(activation_)) {
      hidden = proj_in_(x);
      ops::mul_(hidden, gate_(x, ops::Activation::kGeluTanh));
    } else if (activation_ == FeedForwardActivation::kGelu) {  // not fused: a pass of its own
      hidden = proj_in_(x);
      ops::gelu_(hidden);
    } else {
      hidden = proj_in_(x, ops::Activation::kGeluTanh);
    }
  }
  profile::ScopedTimer t("mlp_out");
  return proj_out_(hidden);
}

}  // namespace ditgen::models::nn
