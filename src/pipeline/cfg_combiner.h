// Classifier-free guidance as diffusers' pipelines run it, in one place:
// CFG is on when guidance_scale > 1; the model batch then holds each
// output's conditional and unconditional half ([cond; uncond]), or under
// cp = 2 each rank of the CFG pair runs one half and the pair exchanges its
// noise predictions (docs/design.md §4). The guided prediction is
//     eps = uncond + g (cond - uncond)
// over the eps channels (a learned sigma's channels are dropped).
// Whether a layout may split the halves (cp = 2 needs guidance) is the
// layout's rule (parallel::layout_problems); this class only runs it.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

class CfgCombiner {
 public:
  // `guidance`: CFG on; `cp`: the CFG pair (size 2) or null (one process
  // runs both halves). A pair without guidance is a logic error: the
  // layout's validation refused it before any weight was read.
  CfgCombiner(bool guidance, parallel::Communicator* cp);

  bool guidance() const { return guidance_; }
  // Each rank of the cp pair runs one half.
  bool split() const { return cp_ != nullptr; }
  // The halves of this rank's model batch, in order (false: the
  // conditional half, true: the unconditional one).
  const std::vector<bool>& halves() const { return halves_; }

  // `out`: the model's output for this rank's halves of `count` outputs,
  // (halves x count, out_C, ...), each sample `out_stride` values of which
  // the first `eps_values` are the eps channels. Writes the guided eps of
  // each output (scale `g`) to `eps`, (count, C, ...) of `eps_values`
  // each. Under cp = 2 both ranks exchange their halves and write the same.
  void combine(const Tensor& out, int64_t count, int64_t eps_values, int64_t out_stride, float g,
               Tensor& eps) const;

 private:
  bool guidance_;
  parallel::Communicator* cp_;
  std::vector<bool> halves_;
};

}  // namespace ditgen::pipeline
