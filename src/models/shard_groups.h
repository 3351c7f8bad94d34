// This rank's groups in a parallel layout (docs/design.md §4), as a model and
// its modules (models/nn/) see them: the tp, sp and pp communicators, the
// sp mode and how the sp ranks share tokens or frames. Apart from the
// family seam (transformer.h) so that the modules need not include it.
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/layout.h"
#include "parallel/patch_pipeline.h"
#include "parallel/sequence_attention.h"
#include "parallel/shard.h"

namespace ditgen::models {

// Null communicators mean size 1; they must outlive the model.
struct ShardGroups {
  parallel::Communicator* tp = nullptr;
  parallel::Communicator* sp = nullptr;
  parallel::SpMode mode = parallel::SpMode::kUlysses;  // sp_mode (resolved: never kAuto)
  parallel::Sharding sp_split;                          // how the sp ranks share tokens / frames (parallel.sp_weights)
  parallel::Communicator* pp = nullptr;                 // PipeFusion's stages (parallel/patch_pipeline.h)
  parallel::PipelineSettings pipeline;                  // its patches and warm-up steps (pp > 1)
  int tp_size() const { return tp ? tp->size() : 1; }
  int tp_rank() const { return tp ? tp->rank() : 0; }
  int sp_size() const { return sp ? sp->size() : 1; }
  int sp_rank() const { return sp ? sp->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
  bool ring() const { return mode == parallel::SpMode::kRing; }
  // The attention module's mode for spatial self-attention (dsp holds each
  // frame whole, so the model gives its attention no sp group there).
  parallel::SequenceMode sequence_mode() const {
    if (mode == parallel::SpMode::kRing) return parallel::SequenceMode::kRing;
    if (mode == parallel::SpMode::kNaivePatch) return parallel::SequenceMode::kLocal;
    return parallel::SequenceMode::kUlysses;
  }
  bool dsp() const { return mode == parallel::SpMode::kDsp; }
  // Bytes this rank has sent through its tp and sp groups so far (what a
  // PAB branch's computation is charged: pab/broadcast.h).
  int64_t sent_bytes() const { return (tp ? tp->bytes_sent() : 0) + (sp ? sp->bytes_sent() : 0); }
};

// What a model's frames allow dsp (which shards a video's frames and
// switches to tokens around a separate temporal attention).
enum class FrameSharding {
  kImage,          // no frames (DiT, PixArt)
  kFrames,         // a separate temporal attention: dsp runs (Latte)
  kWholeSequence,  // one attention over every frame's tokens at once (Wan, CogVideoX)
};

// The layout was validated against the config before loading
// (parallel/layout.h); this guards a load's slicing arithmetic: ConfigError
// unless tp divides `heads` and the MLP width `ff_inner`, Ulysses' sp * tp
// divides `heads`, and dsp meets a model whose frames it can shard
// (`family` names the model in the message: "Wan").
void check_shard_fits(const ShardGroups& shard, int64_t heads, int64_t ff_inner, FrameSharding frames,
                      const char* family);

}  // namespace ditgen::models
