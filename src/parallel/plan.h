// `ditgen plan`'s arithmetic: per-rank weight memory, peak activation memory
// of one forward, and bytes sent per denoising step, for a transformer's
// Workload (layout.h) under a given layout, from config.json alone (no
// weight is loaded). The model family supplies the Workload, weights
// included (models/: e.g. the DiT's per-block split and whole parts).
//
// Notation. L layers, H heads, D = H * head_dim, F = MLP inner size
// (mlp_hidden), N tokens per sequence, G = gathered_per_layer (DiT: its
// adaLN modulation K*D, K = 6 chunks), R = output_per_token (DiT: patch^2 *
// out_channels), I / O = input / output elements per sequence, E =
// eps_elements, e = bytes per element (4: float32; ditgen computes in
// float32 on the CPU, so this is 4 unless planning a half-precision device
// run).
//   b = images_per_batch * (2 if CFG) / cp   sequences in one forward per rank
//                                            (cp gives each rank one CFG half)
//   p = ceil(N / sp)                          tokens per sp rank: rank 0's shard,
//                                            a largest one (shard_sizes)
//   p1 = the second shard's size (p1 = p when sp divides N)
//   Dt = D / tp                               a tp rank's share of heads*head_dim
//
// Weights per rank (elements; times e):
//   L * (split_per_layer / tp + whole_per_layer) + whole_once
// sp and cp replicate all weights.
//
// Activations per rank (elements; times e): the peak working set of one
// forward = what is live throughout a block + the larger of its attention
// and MLP stages:
//   throughout: residual b*p*D, normalised input b*p*D, conditioning b*D,
//     gathered conditioning b*G (+ the local part b*G/tp before its
//     all-gather, tp > 1), model input and output b*(I + O)
//   attention: q, k, v 3*b*p*Dt, attention output b*p*Dt, out projection b*p*D
//     (tp: partial sums, all-reduced in place);
//     ulysses (sp > 1): + q, k, v, output in head-shard form 4*b*N*Dt/sp;
//     ring (sp > 1): + K, V blocks in flight 2*b*p*Dt, log-sum-exp b*p*H/tp
//   MLP: hidden b*p*F/tp, output b*p*D
// Not counted: tiled attention's per-thread score tiles (O(tile), not
// O(N^2)), GEMM workspace, weights converted at load, the scheduler's own
// copies of the latents, and the VAE decode (rank 0 only, after sampling).
//
// Communication per denoising step per rank (bytes sent by rank 0; every
// rank sends the same when sp divides N). One transformer forward per step
// (DDIM, DPM-Solver++ 2M); PAB reuse (which skips some of it) is not modelled.
// Conventions, shared with the communicator's run-time counters: an
// all-reduce of n bytes over g ranks sends 2*(g-1)/g*n (ring); an all-to-all
// or all-gather counts only what goes to other ranks.
//   comm_sp, ulysses: per block 4 all-to-alls over the sp group: q, k, v,
//     each sending (sp-1)/sp of the local b*p*Dt, and the output back,
//     sending the other ranks' tokens b*(N-p)*Dt/sp
//       = L * (3*b*p*Dt*(sp-1)/sp + b*(N-p)*Dt/sp)
//   comm_sp, ring: per block K and V each passed on sp-1 times (rank r sends
//     to r+1, so rank 0 sends every block but rank 1's)
//       = L * 2*b*(N-p1)*Dt
//   comm_tp: per block A = tp_all_reduces_per_layer all-reduces of b*p*D
//     (attention out projection, MLP out; PixArt: also the cross-attention's)
//     = L * A * 2*(tp-1)/tp * b*p*D
//   comm_gather: the per-block conditioning all-gather, L * b*G*(tp-1)/tp
//     (tp > 1), and the model output gathered over sp once per forward,
//     (sp-1)*b*p*R (sp > 1).
//   comm_cp: the eps exchange with the peer, b*E (cp = 2)
//
// Relation to the issue's formulas "Ulysses 4/N*O(p*hs)*L, ring
// 2*O(p*hs)*L, tp 4*O(p*hs)*L": there p*hs is the whole sequence of a
// forward times the hidden size, here b*N*D, and each all-to-all /
// all-reduce is counted at its full buffer. With even shards (N = sp*p) and
// n ranks on the one axis:
//   comm_sp ulysses = 4*(n-1)/n^2 * b*N*D * L = (4/n * b*N*D * L) * (n-1)/n
//   comm_sp ring    = 2*(n-1)/n   * b*N*D * L = (2   * b*N*D * L) * (n-1)/n
//   comm_tp         = 4*(n-1)/n   * b*N*D * L = (4   * b*N*D * L) * (n-1)/n
// i.e. exactly the figures times (n-1)/n, the share that leaves the
// rank; comm_gather and comm_cp are the terms those formulas leave out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/layout.h"

namespace ditgen::parallel {

struct PlanRow {
  Layout layout;
  int64_t batch_per_rank = 0;   // b
  int64_t tokens_per_rank = 0;  // p
  double weight_bytes_per_rank = 0, activation_bytes_per_rank = 0, comm_bytes_per_step_per_rank = 0;
  // Breakdown of comm_bytes_per_step_per_rank (they sum to it).
  double comm_sp = 0, comm_tp = 0, comm_cp = 0, comm_gather = 0;
};

// Weight elements one rank holds under tensor-parallel size tp.
double weight_elements_per_rank(const Workload& work, int tp);

// Throws ConfigError if cp = 2 without CFG.
PlanRow plan_layout(const Layout& layout, const Workload& work, int64_t images_per_batch, bool cfg,
                    int bytes_per_element = 4);

// plan_layout for every valid_layouts(world_size, ...); CFG iff
// guidance_scale > 1 (as diffusers).
std::vector<PlanRow> plan_valid_layouts(int world_size, const Workload& work, int64_t images_per_batch,
                                        double guidance_scale, int bytes_per_element = 4);

// Aligned table, one row per layout, human units; `title` (if any) is the
// first line.
std::string format_plan_table(const std::vector<PlanRow>& rows, const std::string& title = "");

}  // namespace ditgen::parallel
