// Multi-head attention as diffusers' Attention holds it (to_q, to_k, to_v,
// to_out.0; optional norm_q / norm_k), split over tp by heads: q, k and v
// are column-parallel (this rank's heads), to_out row-parallel (all-reduced,
// bias once: nn/linear.h).
//   self-attention   q, k, v from one sequence. The core, which attends
//                    this rank's rows over the whole sequence, is the
//                    caller's: the sequence-parallel module through the
//                    PipeFusion stage (sequence_core below; docs/design.md §4:
//                    Ulysses, ring), or a model's own (Latte's attention
//                    across frames). Optional hooks: a layout switch
//                    around the projections and the core (Latte's temporal
//                    attention under dsp: frames to tokens and back; the
//                    switch communicates, inside the branch that PAB
//                    caches), and rotary positions applied to q and k.
//   cross-attention  keys and values from another sequence that every
//                    rank holds whole (the text), so no sp communication;
//                    one text may serve several consecutive samples.
//                    Optionally a second context (Wan I2V's image tokens,
//                    also whole on every rank): its own keys and values
//                    (add_k_proj, add_v_proj, split over tp like to_k and
//                    to_v; add_k normed by norm_added_k as to_k by norm_k),
//                    attended by the same queries, and that output added
//                    to the first's before to_out (diffusers'
//                    WanAttnProcessor).
// q/k norms (optional): LayerNorm or RMSNorm with a weight, over each head
// or across all heads, applied after the projections and before the
// rotary hook, as diffusers does. An RMSNorm across heads under tp (Wan):
// each rank holds its heads' columns of the weight, and the squared sums of
// each row's columns are all-reduced over tp (one float per row of q and
// of k), computed on the host.
// Profiling scopes (util/profile.h): qkv_proj / cross_qkv_proj, attention /
// cross_attention (the core), layout_switch, out_proj.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/rotary.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "parallel/communicator.h"
#include "parallel/patch_pipeline.h"
#include "parallel/sequence_attention.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

enum class QkNorm { kNone, kLayerNorm, kRmsNorm };
enum class QkNormSpan { kPerHead, kAcrossHeads };

struct AttentionDims {
  int64_t heads = 0, head_dim = 0;
  int64_t query_dim = 0;    // width the queries are projected from (the residual stream, D)
  int64_t context_dim = 0;  // width keys and values are projected from: query_dim, or the text's (cross)
  QkNorm qk_norm = QkNorm::kNone;
  QkNormSpan qk_norm_span = QkNormSpan::kPerHead;
  float qk_norm_eps = 1e-6f;
  int64_t added_kv_dim = 0;  // width of the added context's tokens (add_k_proj / add_v_proj's input); 0 = none
  int64_t inner() const { return heads * head_dim; }
};

// The self-attention core: q, k, v (B, P, Dl) rows of this rank's tokens
// for its heads; writes their attention output, same shape, into out.
using AttentionCore = std::function<void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out)>;

// The layout a self-attention runs in when it is not the block's: `enter`
// takes the block's (B, P, D) input to the attention's (B', P', D), where
// projections and core run; `leave` takes the core's (B', P', Dl) output
// back to (B, P, Dl) before the output projection.
struct LayoutSwitch {
  std::function<Tensor(const Tensor&)> enter, leave;
};

// What a cross-attention attends to. One text may serve `repeat`
// consecutive samples (Latte: every frame of its video): its keys and
// values are projected once, and those samples' queries attend to them as
// one sequence of repeat * P queries (queries are independent, so that is
// the per-sample result without copying the text per sample).
struct CrossContext {
  const Tensor* tokens = nullptr;    // (B / repeat, M, context_dim), whole on every rank
  const int32_t* kv_lens = nullptr;  // host, B / repeat values in [1, M]: the keys each text has; null = all M
  int64_t repeat = 1;                // samples per text
};

// The core of a layer's self-attention over n tokens sharded by sp (through
// `seq`: Ulysses, ring, or none), run by the PipeFusion stage `pipe` over
// the tokens of `patch` (parallel/patch_pipeline.h; stale_kv null: the
// whole sequence at once). pipe and seq must outlive the core.
AttentionCore sequence_core(const parallel::PatchPipeline& pipe, int64_t layer, parallel::Range patch, int64_t n,
                            int64_t head_dim, parallel::StaleKeyValues* stale_kv,
                            const parallel::SequenceParallelAttention& seq);

class Attention {
 public:
  // Its tensors under `prefix` ("transformer_blocks.0.attn1."), whole.
  static TensorDecls tensors(const std::string& prefix, const AttentionDims& dims);
  // This rank's heads (tp, null = size 1, must divide heads; it must
  // outlive the module). A LayerNorm across heads needs tp = 1.
  static Attention load(const io::WeightStore& weights, const std::string& prefix, const AttentionDims& dims,
                        parallel::Communicator* tp, const Placement& place);

  // x (B, P, D) -> (B, P, D): the self-attention's output, all-reduced.
  Tensor self_attention(const Tensor& x, const AttentionCore& core, const LayoutSwitch* around = nullptr,
                        const Rotary* rotary = nullptr) const;
  // x (B, P, D) attending to `context` -> (B, P, D), all-reduced; with
  // added_kv_dim, `added` (required then, refused otherwise) is attended
  // too and its output added before to_out.
  Tensor cross_attention(const Tensor& x, const CrossContext& context, const CrossContext* added = nullptr) const;

  const AttentionDims& dims() const { return dims_; }
  const ColumnParallelLinear& to_q() const { return to_q_; }
  const ColumnParallelLinear& to_k() const { return to_k_; }
  const ColumnParallelLinear& to_v() const { return to_v_; }
  const RowParallelLinear& to_out() const { return to_out_; }

 private:
  // q and k after the q/k norms (themselves without norms).
  void normalize(Tensor& q, Tensor& k) const;
  // The core of a cross-attention: q (B, P, Dl) over context's keys k and
  // values v (T, M, Dl) into out (B, P, Dl).
  void attend(const Tensor& q, const Tensor& k, const Tensor& v, const CrossContext& context, Tensor& out) const;
  Tensor normalized(const Tensor& x, const Tensor& weight, const Tensor& bias) const;
  // The RMSNorm across heads of x (B, P, Dl), this rank's columns, under tp > 1.
  Tensor rms_norm_across_tp(const Tensor& x, const Tensor& weight) const;

  AttentionDims dims_;
  Placement place_;
  parallel::Communicator* tp_ = nullptr;
  int64_t local_heads_ = 0;        // heads / tp
  ColumnParallelLinear to_q_;      // (Dl, query_dim)
  ColumnParallelLinear to_k_;      // (Dl, context_dim)
  ColumnParallelLinear to_v_;      // (Dl, context_dim)
  RowParallelLinear to_out_;       // (query_dim, Dl)
  Tensor norm_q_w_, norm_q_b_;     // (head_dim) per head or (Dl) across heads; the bias LayerNorm only
  Tensor norm_k_w_, norm_k_b_;     // the same for k
  ColumnParallelLinear add_k_;     // (Dl, added_kv_dim): added_kv_dim only
  ColumnParallelLinear add_v_;     // (Dl, added_kv_dim)
  Tensor norm_added_k_w_;          // norm_k_w_'s shape: norm_added_k's weight (added_kv_dim only)
};

}  // namespace ditgen::models::nn
