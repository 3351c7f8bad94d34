// A model's place in a parallel layout, as every family's forward uses it
// (docs/design.md §4): its sp group's attention over the tokens of an image or
// frame (parallel/sequence_attention.h), its PipeFusion stage
// (parallel/patch_pipeline.h) and where its tensors live; and the one loop
// that takes a forward through the stage. Per patch of the tokens (the
// whole image, or PipeFusion's patches one after another) this rank's
// residual rows arrive (the first stage embeds them, later ones receive
// them), go through the stage's layers, and leave (to the next stage, or on
// the last stage as output rows gathered over sp); at the end every rank
// gets the whole output. With a step cache (pab/step_cache.h) the loop
// decides (after the first layer, or from the family's TeaCache signal) and
// runs the rest or adds the residual it added at the last computed step:
// one mechanism for every family.
#pragma once
#include <cstdint>
#include <functional>

#include "models/nn/attention.h"
#include "models/placement.h"
#include "models/shard_groups.h"
#include "pab/step_cache.h"
#include "parallel/patch_pipeline.h"
#include "parallel/sequence_attention.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// A cross-attention's text for a subset of the samples (their tokens and
// key counts), or the whole `text` when `samples` is empty. Holds what
// context() points to: neither copied nor moved.
class TextOfSamples {
 public:
  TextOfSamples(const nn::CrossContext& text, const std::vector<int64_t>& samples);
  TextOfSamples(const TextOfSamples&) = delete;
  TextOfSamples& operator=(const TextOfSamples&) = delete;
  const nn::CrossContext& context() const { return context_; }

 private:
  Tensor tokens_;                // (samples, L, C): the selected texts
  std::vector<int32_t> lengths_;  // their key counts, or empty
  nn::CrossContext context_;
};

class Stage {
 public:
  Stage() = default;
  // The shard's communicators must outlive the stage; `layers`: the model's.
  Stage(const ShardGroups& shard, const Placement& place, int64_t layers);

  const ShardGroups& shard() const { return shard_; }
  const Placement& place() const { return place_; }
  const parallel::PatchPipeline& pipeline() const { return pipe_; }
  // This stage's layers, [begin, end) of the model's.
  parallel::Range layers() const { return pipe_.layers(); }

  // Layer `layer`'s self-attention core over the n tokens of each image or
  // frame, this call's `patch` of them (nn::sequence_core) through `seq`:
  // the stage's sp attention unless given another (Latte's spatial
  // attention under dsp, which holds each frame whole).
  nn::AttentionCore core(int64_t layer, parallel::Range patch, int64_t n, int64_t head_dim,
                         parallel::StaleKeyValues* stale_kv,
                         const parallel::SequenceParallelAttention* seq = nullptr) const;

  // A subset of a forward's samples (sorted indices into its batch): a step
  // cache runs its span over the units that compute only. Empty: every one.
  using Samples = std::vector<int64_t>;

  // What one forward does to each patch.
  struct Pass {
    // The first stage's (B, P, D) residual rows of this rank's tokens `rows`.
    std::function<Tensor(parallel::Range rows)> embed;
    // The stage's layers `layers` (a sub-range of layers()) over them, in
    // place (`patch`: the tokens they are this rank's of). `samples`: hidden
    // holds those samples' rows only (their per-sample inputs are the
    // family's to select: sample_rows), or every sample's when empty.
    std::function<void(Tensor& hidden, parallel::Range patch, parallel::Range layers, const Samples& samples)> layers;
    // The last stage's (B, P, R) output rows of them, the tokens `rows`.
    std::function<Tensor(const Tensor& hidden, parallel::Range rows)> head;
    // Frames sharded (dsp): each rank holds every token of its frames, the
    // video runs as one patch, and this gathers the whole (B, n, R) output
    // from each rank's rows. Empty: tokens sharded over sp, output rows
    // gathered by token.
    std::function<Tensor(const Tensor& rows)> gather_frames;
    // TeaCache's signal (pab/step_cache.h) from the first stage's input
    // rows: the family's modulated input. per_token: the values are this
    // rank's tokens' (summed over sp), else the same whole values on every
    // rank (Wan's time embedding). Unset: the family has none.
    struct Signal {
      Tensor values;  // each sample's values contiguous
      bool per_token = true;
    };
    std::function<Signal(const Tensor& hidden)> teacache_signal;
  };
  // Runs `pass` over n tokens of `batch` sequences, D = width; returns the
  // (batch, n, out_width) output on every rank. `cache`: a step cache, or
  // null (one stage only: PipeFusion takes no cache).
  Tensor run(int64_t n, int64_t batch, int64_t width, int64_t out_width, parallel::StaleKeyValues* stale_kv,
             const Pass& pass, pab::StepCache* cache = nullptr) const;

 private:
  // A step cache's plan for one forward: the decision (alike on every
  // rank), this stage's span, and the first stage's rows of every patch
  // made ready (after the first block, for first_block).
  struct Prepared {
    std::vector<bool> compute;  // per unit
    parallel::Range span;       // this stage's layers the cache may skip
    std::vector<Tensor> first_rows;
  };
  Prepared prepare_cached(const std::vector<parallel::Range>& patches, int64_t n, const Pass& pass,
                          pab::StepCache& cache) const;
  std::vector<bool> decide(const Tensor& signal, bool per_token, pab::StepCache& cache) const;
  // The span over one patch's rows (tokens [row0, row0 + P) of the `tokens`
  // this rank's patches cover): run, or the kept residual added.
  void run_span(Tensor& hidden, parallel::Range patch, int64_t row0, int64_t tokens, const Prepared& p,
                const Pass& pass, pab::StepCache& cache) const;
  // This rank's token rows of a patch: its sp share, or every token when
  // the frames are sharded (dsp).
  parallel::Range token_rows(parallel::Range patch, int64_t n, const Pass& pass) const;

  ShardGroups shard_;
  Placement place_;
  parallel::SequenceParallelAttention seq_attn_;  // self-attention over the sp group
  parallel::PatchPipeline pipe_;                  // PipeFusion's stages (one: every layer)
};

}  // namespace ditgen::models
