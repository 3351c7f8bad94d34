// The adaLN-single transformer block PixArt and Latte share (diffusers'
// BasicTransformerBlock with norm_type ada_norm_single, DESIGN.md §6). The
// model computes one (B, 6D) modulation per forward (adaln_single); each
// block adds its own scale_shift_table and splits it into shift, scale and
// gate for the self-attention and the feed-forward:
//   x += gate_msa * attn1(LN(x) * (1 + scale_msa) + shift_msa)
//   x += attn2(x, text)                  (optional: no norm, no modulation)
//   x += gate_mlp * ff(LN(x) * (1 + scale_mlp) + shift_mlp)
// LayerNorms without affine; ff = Linear(D, F), GELU (tanh), Linear(F, D).
//
// The block runs over this rank's rows of (B, P, D) tokens. The
// self-attention core is the caller's (PixArt: sequence-parallel attention
// over the whole image; Latte's temporal blocks: attention across frames
// behind the DSP switch); the cross-attention reads text that every rank
// holds whole, so it needs no sp communication. With tp, each rank holds
// its heads of q/k/v (both attentions) and its MLP features; the output
// projections are row-split and all-reduced (parallel/tensor_parallel.h).
// PAB (pab/broadcast.h) may replace each branch's output (self-attention,
// cross-attention, feed-forward; after the all-reduce, before the gate) with
// one computed at an earlier step.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/placement.h"
#include "models/transformer.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// A size embedder of adaln_single (diffusers' TimestepEmbedding): linear_1,
// SiLU, linear_2, fed by Timesteps(256, flip_sin_to_cos, shift 0).
struct EmbedderMlp {
  Tensor linear1_w, linear1_b;  // (W, 256), (W)
  Tensor linear2_w, linear2_b;  // (W, W), (W)

  static constexpr int64_t kChannels = 256;  // Timesteps(num_channels=256)
  // Its tensors under `prefix` ("adaln_single.emb.timestep_embedder.") with their shapes.
  static std::vector<std::pair<std::string, Shape>> tensors(const std::string& prefix, int64_t width);
  static EmbedderMlp load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);
  // (len(values), W) on place's device.
  Tensor embed(const std::vector<float>& values, const Placement& place) const;
};

struct AdaSingleBlockDims {
  int64_t heads = 0, head_dim = 0;  // D = heads * head_dim
  int64_t ff_inner = 0;             // F
  int64_t cross_dim = 0;            // width of the text the cross-attention reads; 0 = no cross-attention
  float norm_eps = 1e-6f;
  int64_t inner_dim() const { return heads * head_dim; }
};

// One block's weights as held by this rank (Dl = D/tp, Fl = F/tp; with
// tp = 1 the whole tensors, GEMM weights borrowed from the file on the CPU).
struct AdaSingleBlockWeights {
  Tensor scale_shift_table;             // (6, D)
  Tensor q_w, q_b, k_w, k_b, v_w, v_b;  // (Dl, D), (Dl) each: attn1, this rank's heads
  Tensor out_w, out_b;                  // (D, Dl), (D): attn1 output, bias whole
  Tensor cross_q_w, cross_q_b;          // (Dl, D), (Dl): attn2 (when cross_dim > 0)
  Tensor cross_k_w, cross_k_b;          // (Dl, Dc), (Dl)
  Tensor cross_v_w, cross_v_b;          // (Dl, Dc), (Dl)
  Tensor cross_out_w, cross_out_b;      // (D, Dl), (D)
  Tensor ff1_w, ff1_b;                  // (Fl, D), (Fl)
  Tensor ff2_w, ff2_b;                  // (D, Fl), (D)
};

class AdaSingleBlock {
 public:
  // The tensors of one block under `prefix` ("transformer_blocks.3.") with
  // their full shapes, for WeightStore::expect before anything is loaded.
  static std::vector<std::pair<std::string, Shape>> tensors(const std::string& prefix, const AdaSingleBlockDims& dims);

  // Loads this rank's part (the shapes must have been checked). tp must
  // divide heads and ff_inner; the shard's communicators outlive the block.
  static AdaSingleBlock load(const io::WeightStore& weights, const std::string& prefix, const AdaSingleBlockDims& dims,
                             const ShardGroups& shard, const Placement& place);

  // The self-attention core: q, k, v (B, P, Dl) rows of this rank's tokens
  // for its heads; writes the attention output, same shape, into out.
  using AttentionCore = std::function<void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out)>;

  // The layout the self-attention runs in, when it is not the block's
  // (Latte's temporal blocks under Dynamic Sequence Parallel, DESIGN.md §4):
  // `enter` takes the block's normalised input (B, P, D) to the attention's
  // layout (B', P', D), where the q/k/v projections and the core run;
  // `leave` takes the core's output (B', P', Dl) back to (B, P, Dl), before
  // the output projection. Both communicate, inside the branch PAB caches,
  // so a reused attention skips both.
  struct LayoutSwitch {
    std::function<Tensor(const Tensor&)> enter, leave;
  };

  // What the cross-attention attends to: the projected text, whole on
  // every rank, and per text how many of its rows are keys. One text may
  // serve `repeat` consecutive samples (Latte: every frame of its video):
  // its keys and values are projected once, and the samples' queries attend
  // to them as one sequence of repeat * P queries (queries are independent,
  // so that is the per-frame result without projecting or copying the text
  // once per frame).
  struct Text {
    const Tensor* tokens = nullptr;    // (B / repeat, M, Dc)
    const int32_t* kv_lens = nullptr;  // host, B / repeat values in [1, M]; null = all M
    int64_t repeat = 1;                // samples per text
  };

  // Where this block's branch outputs are cached under PAB.
  struct Pab {
    pab::BroadcastCache* cache = nullptr;  // null: no PAB
    int block = 0;                              // the layer index (pab.mlp.blocks lists these)
    pab::Kind self_kind = pab::Kind::kSpatial;  // the self-attention's kind (Latte's temporal blocks: kTemporal)
    // The cache key's part (pab/broadcast.h): Latte's temporal block of a
    // layer is part 1, so its feed-forward is kept apart from the spatial
    // block's (both kind mlp, both reused when the layer is listed).
    int part = 0;
  };

  // hidden (B, P, D) += the three branches, in place; timestep_mod (B, 6D)
  // the model's shared modulation (before this block's table is added);
  // text: required iff the block has a cross-attention; around: null = the
  // self-attention runs in the block's layout.
  void forward(Tensor& hidden, const Tensor& timestep_mod, const Text* text, const AttentionCore& self_attention,
               const Pab& pab, const LayoutSwitch* around = nullptr) const;

  const AdaSingleBlockWeights& weights() const { return w_; }
  const AdaSingleBlockDims& dims() const { return dims_; }

 private:
  // Bytes this rank has sent through its tp and sp groups so far.
  int64_t comm_bytes() const;
  // A branch's output: PAB's cached one when it says reuse, else compute()'s (then handed to the cache).
  Tensor branch(const Pab& pab, pab::Kind kind, const std::function<Tensor()>& compute) const;

  AdaSingleBlockDims dims_;
  ShardGroups shard_;
  Placement place_;
  AdaSingleBlockWeights w_;
};

// What PixArt and Latte hold outside their blocks, the same for both: the
// patch embedding (a stride-p conv as a linear), adaln_single (timestep
// embedder + linear), the caption projection and the final layer.
struct AdaSingleStemDims {
  int64_t inner = 0;             // D
  int64_t in_channels = 0, out_channels = 0;
  int64_t patch = 0;             // p
  int64_t caption_channels = 0;  // width of the text embeddings
};

struct AdaSingleStem {
  Tensor patch_w, patch_b;        // (D, C*p*p), (D)   pos_embed.proj as a linear
  EmbedderMlp timestep_embedder;  // W = D             adaln_single.emb.timestep_embedder
  Tensor adaln_w, adaln_b;        // (6D, D), (6D)     adaln_single.linear
  Tensor caption1_w, caption1_b;  // (D, caption), (D) caption_projection.linear_1
  Tensor caption2_w, caption2_b;  // (D, D), (D)       caption_projection.linear_2
  Tensor final_table;             // (2, D)            scale_shift_table: shift, scale
  Tensor proj_out_w, proj_out_b;  // (p*p*out, D), (p*p*out)

  static std::vector<std::pair<std::string, Shape>> tensors(const AdaSingleStemDims& dims);
  // GEMM weights through load_matrix, the rest through put.
  static AdaSingleStem load(const io::WeightStore& weights, const AdaSingleStemDims& dims, const Placement& place);
  // (B, 6D): adaln_single.linear(SiLU(embedded)), the blocks' shared modulation.
  Tensor modulation(const Tensor& embedded) const;
  // (B, L, D): linear_1, GELU tanh, linear_2 on every text row.
  Tensor caption(const Tensor& text, const Placement& place) const;
  // (R, P, p*p*out): the final layer on hidden (R, P, D), sample r
  // modulated by scale_shift_table + embedded row r (no SiLU), LayerNorm
  // eps 1e-6, proj_out.
  Tensor final_layer(const Tensor& hidden, const Tensor& embedded, const Placement& place) const;
};

// The text arguments of a text-conditional forward against a batch of
// `batch` samples: text (batch, L, caption_channels), text_lengths empty or
// batch values in [1, L]. Calls fail(message) otherwise.
void check_text_args(const ForwardArgs& args, int64_t batch, int64_t caption_channels,
                     const std::function<void(const std::string&)>& fail);

}  // namespace ditgen::models
