// Sequence-parallel attention (docs/design.md §4): the attention core of a
// transformer whose tokens are sharded over the sp ranks. Every rank holds
// the q, k, v rows of its tokens [split.range(n, sp, rank)] (even shards,
// or by per-rank weights: parallel/shard.h) for its heads
// (with tp, its own heads only: H_local = heads / tp) and gets back the
// attention output of those rows over the whole sequence:
//   sp = 1   plain attention;
//   ulysses  an all-to-all turns the token shards of q, k, v into head
//            shards of the whole sequence (H_local / sp heads each),
//            attention runs there, and one all-to-all turns the output
//            back (H_local must divide by sp);
//   ring     the K/V shards travel around the ring (sp - 1 send/recv
//            steps); each step's partial output over one key block merges
//            into the running one by log-sum-exp;
//   local    (sp_mode naive_patch, xDiT's naive patch parallelism) each
//            rank's tokens attend to its own tokens only: no
//            communication, not the whole-sequence result (an
//            approximation whose seams show; README, Parallel runs).
// Cross-attention (queries sharded, keys and values whole on every rank,
// such as text tokens, with optional per-sample key counts) needs no
// communication. The module moves tensors through ops:: and
// parallel/tensor_collectives.h only, so it runs on any device and dtype;
// it knows tokens, heads and bytes, never a model's fields.
#pragma once
#include <cstdint>

#include <functional>
#include <utility>

#include "parallel/communicator.h"
#include "parallel/shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

enum class SequenceMode { kUlysses, kRing, kLocal };

class SequenceParallelAttention {
 public:
  // sp: the sequence-parallel group (null = size 1); it must outlive this.
  // compute: the attention's arithmetic (AttentionArgs::compute).
  // split: how the ranks share the tokens (ring takes per-rank weights).
  explicit SequenceParallelAttention(Communicator* sp = nullptr, SequenceMode mode = SequenceMode::kUlysses,
                                     DType compute = DType::kF32, Sharding split = {})
      : sp_(sp), mode_(mode), compute_(compute), split_(std::move(split)) {}

  int size() const { return sp_ ? sp_->size() : 1; }
  int rank() const { return sp_ ? sp_->rank() : 0; }
  SequenceMode mode() const { return mode_; }
  Communicator* communicator() const { return sp_; }
  // This rank's tokens of a sequence of n.
  int64_t local_tokens(int64_t n) const;

  // What the queries attend to, when not the sequence's own keys and
  // values (PipeFusion: a patch's queries read the whole image's, kept
  // across steps, parallel/patch_pipeline.h). Called with the sequence's k
  // and v in the layout the attention runs in, (B, n, C) for sp = 1 or the
  // head shard (B, n, C/sp) after Ulysses' all-to-all; returns the keys and
  // values to use, (B, M, same C), any M.
  using KeyValueSource = std::function<std::pair<Tensor, Tensor>(const Tensor& k, const Tensor& v)>;

  // Self-attention over the whole sequence of n tokens (kLocal: over this
  // rank's own P_me). q, k, v, out: (B, P_me, H_local*head_dim) rows of
  // this rank's tokens; out is written. With `context` (sp = 1 or Ulysses
  // only) the queries read the keys and values it returns instead.
  void self_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim, int64_t n,
                      Tensor& out, const KeyValueSource& context = {}) const;

  // Cross-attention of this rank's queries q (B, P_me, H*head_dim) to keys
  // and values k, v (B, M, H*head_dim) that every rank holds whole; out like
  // q. kv_lens (host, B values in [1, M], or null): sample b attends to its
  // first kv_lens[b] keys only. No communication.
  static void cross_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim, Tensor& out,
                              const int32_t* kv_lens = nullptr, DType compute = DType::kF32);

 private:
  void ulysses(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim, int64_t n, Tensor& out,
               const KeyValueSource& context) const;
  void ring(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim, int64_t n, Tensor& out) const;

  Communicator* sp_ = nullptr;
  SequenceMode mode_ = SequenceMode::kUlysses;
  DType compute_ = DType::kF32;
  Sharding split_;
};

}  // namespace ditgen::parallel
