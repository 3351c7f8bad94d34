// PipeFusion (xDiT's displaced patch pipeline), the parallel half: a
// transformer's layers split into pp stages of consecutive layers, one per
// rank of the pp group (stage s holds layers even_shard(L, pp, s), or a
// share by per-stage weights: parallel/shard.h), and the
// image's tokens sent through the stages as M patches, so that stage s
// works on patch m while stage s+1 works on patch m-1.
//
// What makes the patches independent is the attention: patch m's queries
// attend to the keys and values of the whole image, where its own are fresh
// and the other patches' are the ones this stage computed last, i.e. this
// step's for the patches before m and the previous step's for those after
// it (stale by one step: xDiT's observation is that consecutive diffusion
// steps' activations are close). A stage keeps, per layer it holds, the
// keys and values of every token (StaleKeyValues, per generation).
// The first `warmup_steps` steps of a generation run synchronously (one
// patch: the whole image, exact), which also fills those buffers; with
// warmup_steps >= steps the result is the single-process one.
//
// Per forward the hops are point to point: stage s sends each patch's
// residual rows (B, P_m, D) to stage s+1, and the last stage broadcasts the
// model output (B, N, R) to every stage at the end (all return the whole
// prediction, as every layout does). Unlike xDiT, the pipeline drains at
// the end of every step (the scheduler step needs the whole prediction
// here), so each step has a bubble of (pp - 1) patch slots out of M + pp - 1.
//
// With sp > 1 (Ulysses only) each stage is an sp group sharing every
// patch's tokens: a rank hops its shard to the same sp rank of the next
// stage, Ulysses' all-to-all gives it the whole patch for its head shard,
// and it keeps the keys and values of every token for those heads.
//
// A video's patch is a band of tokens of every frame (each frame's spatial
// attention reads its kept keys and values; Latte's temporal attention, across
// the frames of one token, stays within the patch).
//
// This layer knows tokens, layers and tensors, never a model's fields; the
// models (DiT, PixArt, Latte) call it around their own blocks.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/sequence_attention.h"
#include "parallel/shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

// This rank's tokens of a patch when the stage's sp ranks share it.
inline Range patch_rows(Range patch, const Sharding& split, int parts, int index) {
  const Range sub = split.range(patch.size(), parts, index);
  return {patch.begin + sub.begin, patch.begin + sub.end};
}

struct PipelineSettings {
  int patches = 1;       // M: patches per step after the warm-up
  int warmup_steps = 1;  // synchronous steps at the start of each generation (>= 1)
  Sharding layers;       // how the stages share the layers (even, or parallel.sp_weights)
};

// The keys and values one stage keeps across the steps of one generation
// (the denoising loop makes one per generation and says each step begins).
class StaleKeyValues {
 public:
  explicit StaleKeyValues(int warmup_steps) : warmup_steps_(warmup_steps) {}
  void begin_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }
  // Whether this step runs synchronously (the whole image as one patch).
  bool warming_up() const { return step_ < warmup_steps_; }
  // Layer `local`'s (0-based among the stage's layers) buffer of (B, N, C)
  // keys or values, (re)made with that shape, device and dtype in a warm-up
  // step (which writes every row before any is read); after the warm-up a
  // buffer of another shape is a logic error.
  Tensor& keys(size_t local, const Shape& shape, Device device, DType dtype);
  Tensor& values(size_t local, const Shape& shape, Device device, DType dtype);

 private:
  Tensor& buffer(std::vector<Tensor>& list, size_t local, const Shape& shape, Device device, DType dtype) const;

  int warmup_steps_ = 1;
  int64_t step_ = 0;
  std::vector<Tensor> keys_, values_;  // per local layer: (B, N, C)
};

class PatchPipeline {
 public:
  PatchPipeline() = default;  // no layers yet: a model's load makes the real one
  // pp: the pipeline group (null or size 1: one stage); it must outlive this.
  PatchPipeline(Communicator* pp, int64_t layers, PipelineSettings settings);

  int stages() const { return pp_ ? pp_->size() : 1; }
  int stage() const { return pp_ ? pp_->rank() : 0; }
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() == stages() - 1; }
  // This stage's layers, [begin, end) of the model's.
  Range layers() const { return layers_; }
  bool holds(int64_t layer) const { return layer >= layers_.begin && layer < layers_.end; }
  Communicator* communicator() const { return pp_; }

  // The token ranges of n that travel the stages in this forward: the whole
  // image with one stage, during a warm-up step or with no state
  // (synchronous), else the M patches (even_shard of n).
  std::vector<Range> patches(int64_t n, const StaleKeyValues* state) const;

  // Stage hops of a patch's residual rows (B, P, D): received from the
  // stage before (into a tensor of the right shape, device and dtype), sent
  // to the stage after. The first stage receives nothing, the last sends
  // nothing. Nothing checks the two sides' counts at run time: both derive
  // the shape from the same patch, sp shard and batch (by construction; a
  // mismatch would be an MPI truncation error, or an NCCL hang).
  void receive(Tensor& hidden) const;
  void send(const Tensor& hidden) const;

  // Self-attention of one patch's queries against the keys and values of all
  // n tokens: q, k, v, out (B, P_r, C) rows of this rank's tokens of
  // `patch` (patch_rows) for its heads (C = heads * head_dim), through
  // `seq`: sp = 1, or Ulysses over the stage's sp group (the patch's tokens
  // sharded over it). With a state, the patch's keys and values (in the
  // layout the attention runs in) are first written into layer `layer`'s
  // buffers, whose other rows hold what earlier patches and steps wrote;
  // without one the patch must be the whole image. With one stage this is
  // seq's plain self-attention over all n tokens.
  void attention(int64_t layer, Range patch, int64_t n, const Tensor& q, const Tensor& k, const Tensor& v,
                 int64_t head_dim, Tensor& out, StaleKeyValues* state, const SequenceParallelAttention& seq) const;

  // On the last stage, a patch's output rows of this rank (B, P_r, R):
  // gathered over the stage's sp group (sp, split) into the patch's (B, P,
  // R) and written into its rows of out (B, N, R), which the first call
  // makes (out is the gathered tensor itself when the patch is all n).
  void collect_output(Communicator* sp, const Sharding& split, const Tensor& rows, Range patch, int64_t n,
                      Tensor& out) const;
  // The model output `shape` (B, N, R), collected by the last stage, to
  // every stage (made on the others, with that device and dtype).
  void share_output(Tensor& out, const Shape& shape, Device device, DType dtype) const;

 private:
  Communicator* pp_ = nullptr;
  Range layers_;
  PipelineSettings settings_;
};

}  // namespace ditgen::parallel
