// The feed-forward of a transformer block as diffusers' FeedForward holds
// it: net.0.proj (D -> F, or D -> 2F for a gated one), the activation,
// net.2 (F -> D). Under tp each rank holds F/tp features: net.0 is
// column-parallel, net.2 row-parallel (all-reduced, bias once:
// nn/linear.h). Activations:
//   kGeluTanh       GELU, tanh approximation ("gelu-approximate"), fused
//                   into the first GEMM on the CPU;
//   kGatedGeluTanh  GEGLU with the tanh GELU ("geglu-approximate"): the
//                   first projection's rows [0, F) are the value, [F, 2F)
//                   the gate, y = value * gelu_tanh(gate); each half is
//                   split over tp like one projection;
//   kGelu           exact (erf) GELU (ops::gelu_), a pass after the first
//                   GEMM.
// Profiling scopes (util/profile.h): mlp_in (the first projection and its
// activation), mlp_out.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

enum class FeedForwardActivation { kGeluTanh, kGatedGeluTanh, kGelu };

struct FeedForwardDims {
  int64_t dim = 0;    // D, the residual stream's width
  int64_t inner = 0;  // F
  FeedForwardActivation activation = FeedForwardActivation::kGeluTanh;
};

class FeedForward {
 public:
  // Its tensors under `prefix` ("transformer_blocks.0.ff."), whole.
  static TensorDecls tensors(const std::string& prefix, const FeedForwardDims& dims);
  // This rank's features (tp, null = size 1, must divide F; it must outlive the module).
  static FeedForward load(const io::WeightStore& weights, const std::string& prefix, const FeedForwardDims& dims,
                          parallel::Communicator* tp, const Placement& place);

  // x (B, P, D) -> (B, P, D), all-reduced.
  Tensor operator()(const Tensor& x) const;

  const ColumnParallelLinear& proj_in() const { return proj_in_; }
  const RowParallelLinear& proj_out() const { return proj_out_; }

 private:
  FeedForwardActivation activation_ = FeedForwardActivation::kGeluTanh;
  ColumnParallelLinear proj_in_;  // (Fl, D); gated: the value half
  ColumnParallelLinear gate_;     // (Fl, D): the gate half (gated only)
  RowParallelLinear proj_out_;    // (D, Fl)
};

}  // namespace ditgen::models::nn
