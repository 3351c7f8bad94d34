// `ditgen plan`'s arithmetic: per-rank weight memory, peak activation memory
// of one forward, and bytes sent per denoising step, for a transformer's
// Workload (layout.h) under a given layout, from config.json alone (no
// weight is loaded). The model family supplies the Workload, weights
// included (models/: e.g. the DiT's per-block split and whole parts).
//
// Notation. L layers, H heads, D = H * head_dim, F = MLP inner size
// (mlp_hidden), N tokens per image or frame, T frames per video (image
// models: T = 1), G = gathered_per_layer (DiT: its adaLN modulation K*D,
// K = 6 chunks), R = output_per_token (DiT: patch^2 * out_channels), I / O
// = input / output elements per sequence, E = eps_elements, A =
// tp_all_reduces_per_layer (one per attention operation of the Workload's
// list and per MLP: DiT 2, PixArt 3, Latte 5), e = bytes per element (4:
// float32; ElementSizes: weights may differ, see there).
//   b = images_per_batch * (2 if CFG) / cp   sequences (images or videos) in
//                                            one forward per rank
//   p = N_0, p1 = N_1                        token shards 0 and 1 of N over
//                                            sp (shard_sizes; p1 = p if sp = 1)
//   f = T_0                                  frame shard 0 of T over sp (dsp)
//   Dt = D / tp                              a tp rank's share of heads*head_dim
// With even shares rank 0 holds a largest shard of everything, so its
// figures are the maxima; with parallel.sp_weights they are rank 0's. Outside the temporal attention a rank holds
//   rows = b*f*N (dsp: its frames, all their tokens)
//        = b*T*p (ulysses, ring, and images: its tokens of every frame)
// token rows of width D, as S sequences of P tokens for the spatial
// attention: S = b*f, P = N (dsp); S = b*T, P = p otherwise.
//
// Weights per rank (elements; times e, the split part times the layer
// matrices' bytes per element when quantized):
//   L * (split_per_layer / tp + whole_per_layer) + whole_once
// sp and cp replicate all weights.
//
// Activations per rank (elements; times e): the peak working set of one
// forward = what is live throughout a block + the largest of its stages:
//   throughout: residual rows*D, normalised input rows*D, conditioning b*D,
//     gathered conditioning b*G (+ the local part b*G/tp before its
//     all-gather, tp > 1), model input and output b*(I + O)
//   attention: q, k, v 3*rows*Dt, attention output rows*Dt, out projection
//     rows*D (tp: partial sums, all-reduced in place);
//     ulysses (sp > 1): + q, k, v, output in head-shard form 4*S*N*Dt/sp;
//     ring (sp > 1): + K, V blocks in flight 2*S*p_max*Dt (p_max: the
//       largest shard), log-sum-exp rows*H/tp
//   temporal attention (a video's, under dsp): the switched input
//     b*T*p*D, q, k, v and output 4*b*T*p*Dt, the output switched back
//     rows*Dt, out projection rows*D (ulysses, ring, sp = 1: as attention
//     above)
//   MLP: hidden rows*F/tp, output rows*D
// Not counted: the text and its per-frame copies (cross-attention keys),
// tiled attention's per-thread score tiles (O(tile), not O(N^2)), GEMM
// workspace, weights converted at load, the scheduler's own copies of the
// latents, and the VAE decode (rank 0 only, after sampling).
//
// Communication per denoising step per rank (bytes sent by rank 0). One
// transformer forward per step (DDIM, DPM-Solver++ 2M); PAB reuse (which
// skips some of it) is not in the totals, but each branch's figure is
// given, and a reused branch skips exactly that. The conventions are the
// communicator's run-time counters (parallel/communicator.h): an
// all-reduce of n bytes over g ranks sends 2*(g-1)*n/g (ring; integer
// division, per call); an all-to-all or all-gather counts only what goes
// to other ranks.
//   per block, each branch (bytes one computation of it sends), by the
//   kind of each attention operation the Workload lists for a layer:
//     tp all-reduce of a branch output: ar = 2*(tp-1)*rows*D*e/tp (tp > 1)
//     spatial (and spatio-temporal, whose per-frame token shards send the
//     same) = sp attention + ar, where sp attention is
//       ulysses: q, k, v each sending (sp-1)/sp of S*P*Dt, and the output
//         back, the other ranks' tokens S*(N-p)*Dt/sp:
//         3*S*p*Dt*(sp-1)/sp + S*(N-p)*Dt/sp
//       ring: K and V each passed on sp-1 times (rank r sends to r+1, so
//         rank 0 sends every block but rank 1's): 2*S*(N-p1)*Dt
//       dsp: nothing (every frame is whole on its rank)
//     temporal (video) = the dsp switch + ar; the switch (dsp only): the
//       normalised input to the token shard, b*f*(N-p)*D, and the attention
//       output (before its out projection) back, b*(T-f)*p*Dt; ulysses and
//       ring already hold every frame of their tokens: nothing
//     cross = ar (keys from another sequence, whole on every rank: no sp
//       bytes), mlp = ar (each MLP)
//   comm_sp = L * the sum of the layer's attention operations' sp bytes
//   comm_tp = L * A * ar, + with q/k norms across heads (Wan, tp > 1) per
//     attention two all-reduces of a float per row: q's rows and k's
//     (rows, or b*T for a cross-attention over T text rows)
//   comm_gather: the per-block conditioning all-gather, L * b*G*(tp-1)/tp
//     (tp > 1), and the model output gathered over sp once per forward,
//     (sp-1)*rows*R (sp > 1).
//   comm_cp: the eps exchange with the peer, b*E (cp = 2)
//
// PipeFusion (pp > 1, parallel/patch_pipeline.h; sp Ulysses or 1): rank 0
// is the first stage and holds L0 layers (even_shard(L, pp, 0), or its
// share by sp_weights), so L0 replaces L in the weights and in the
// per-layer communication above. Its activations add the keys and values
// kept per layer, 2*L0*S*N*Dt/sp (S = b*T sequences: a video's frames),
// and the output every stage receives, S*N*R (the warm-up steps run the
// whole image, so rows are as without pp). Per step it sends its rows of
// every patch to the next stage, comm_pp = S*sum_m(pm)*D (pm: its sp share
// of patch m, per frame; sum = p when the shards
// divide), and Ulysses runs per patch: the sum over patches of the
// ulysses term with p -> pm, N -> the patch's tokens (after the warm-up;
// the warm-up step's whole-image figure is the same when shards divide).
// Rank 0 gathers no output (the last stage does, then broadcasts it,
// (pp-1)*S*N*R). With M patches a step takes M + pp - 1 patch slots, of
// which each stage idles pp - 1: the bubble (pp-1)/(M+pp-1).
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
// rank; comm_gather and comm_cp are the terms those formulas leave out. For
// a video under dsp (tp = 1), 2*(n-1)/n^2 * b*T*N*D * L: half of Ulysses'.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/layout.h"

namespace ditgen::parallel {

struct PlanRow {
  Layout layout;
  int64_t batch_per_rank = 0;   // b
  int64_t frames_per_rank = 0;  // video models: frames outside the temporal attention (dsp f, else T); images 0
  int64_t tokens_per_rank = 0;  // tokens per image or frame outside the temporal attention (dsp N, else p)
  double rows_per_rank = 0;     // token rows a rank holds outside the temporal attention (S*P)
  double weight_bytes_per_rank = 0, activation_bytes_per_rank = 0, comm_bytes_per_step_per_rank = 0;
  // Breakdown of comm_bytes_per_step_per_rank (they sum to it).
  double comm_sp = 0, comm_tp = 0, comm_cp = 0, comm_gather = 0, comm_pp = 0;
  // PipeFusion (pp > 1): what the last stage sends per step instead of
  // comm_pp (the output to every other stage), the keys and values a stage
  // keeps (in activation_bytes_per_rank), and the share of a step each
  // stage idles while the pipeline fills and drains.
  double comm_pp_last = 0, stale_kv_bytes = 0, pipeline_bubble = 0;
  // Bytes one computation of a block's branch sends, per PAB kind (what a
  // reuse of it skips): spatial self-attention, temporal self-attention
  // (video), cross-attention, one MLP. 0 where the model has no such branch.
  double branch_spatial = 0, branch_temporal = 0, branch_cross = 0, branch_mlp = 0;
};

// Weight elements one rank holds under tensor-parallel size tp.
double weight_elements_per_rank(const Workload& work, int tp);

// Bytes per element of the weights, of the activations and of what is sent:
// on CUDA weights and activations take the compute dtype, on the CPU in
// bfloat16 only the GEMM weights take 2 bytes; messages are float32
// everywhere.
struct ElementSizes {
  int weights = 4, activations = 4;
  // Bytes per element of the matrices tp splits inside the layers when
  // they are not `weights` wide: a GGUF file's blocks (Q8_0: 34 / 32),
  // model.quantize int8 (1). 0: `weights`.
  double layer_matrices = 0;
  // What a collective moves per element: float32 whatever the activations'
  // dtype (parallel/tensor_collectives.h stages bfloat16 and float16
  // through float32), so the communicator's counters and plan agree.
  int messages = 4;
  ElementSizes() = default;
  ElementSizes(int both) : weights(both), activations(both) {}  // NOLINT(google-explicit-constructor): one size
  ElementSizes(int weight_bytes, int activation_bytes) : weights(weight_bytes), activations(activation_bytes) {}
};

// Throws ConfigError if cp = 2 without CFG.
PlanRow plan_layout(const Layout& layout, const Workload& work, int64_t images_per_batch, bool cfg,
                    ElementSizes bytes = {});

// plan_layout for every valid_layouts(world_size, ...); CFG iff
// guidance_scale > 1 (as diffusers).
std::vector<PlanRow> plan_valid_layouts(int world_size, const Workload& work, int64_t images_per_batch,
                                        double guidance_scale, ElementSizes bytes = {});

// Aligned table, one row per layout, human units; `title` (if any) is the
// first line. Rows of a video model show b x f x p (videos, frames and
// tokens per frame a rank holds outside the temporal attention).
std::string format_plan_table(const std::vector<PlanRow>& rows, const std::string& title = "");

}  // namespace ditgen::parallel
