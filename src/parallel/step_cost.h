// What one denoising step asks of a rank, for `plan`'s time estimate
// (cli/rate_probe.h supplies the machine's rates): the floating-point
// operations of one transformer forward and the bytes it moves, from the
// same Workload and plan row as the memory and communication figures
// (parallel/plan.h's notation: rows = b*f*N or b*T*p token rows a rank
// holds, D, Dt = D/tp, F, L0 = the layers on the rank).
//
//   flops = L0 * ( sum over the layer's attention operations of
//                    projections 2*rows*D*4*Dt (q, k, v, out; a
//                      cross-attention's k and v over its text rows,
//                      2*b*S*K*D*2*Dt, S sequences per sample) + scores and values 4*rows*K*Dt,
//                      K = the keys per query (AttentionOp::tokens, the
//                      tokens of a sequence when not given; an added
//                      context of K' tokens, AttentionOp::added_tokens:
//                      its k and v 2*b*S*K'*D*2*Dt + 4*rows*K'*Dt more)
//                + feed_forwards * 2*rows*2*D*F/tp )
//   bytes = the rank's weights (each read once per forward) + twice a
//           block's activations per layer (written and read back) + the
//           bytes it sends
//
// Not counted: norms, modulation and elementwise ops apart from their
// bytes, the embedders and final layer, the VAE and text encoder (they run
// once per output, not per step).
#pragma once
#include "parallel/layout.h"
#include "parallel/plan.h"

namespace ditgen::parallel {

struct StepCost {
  double flops = 0;  // of one forward on rank 0
  double bytes = 0;  // moved through memory by it, sends included
};

StepCost step_cost(const PlanRow& row, const Workload& work);

}  // namespace ditgen::parallel
