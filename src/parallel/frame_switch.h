// The Dynamic Sequence Parallel switch (DSP, docs/design.md §4) for video
// activations (B, F, N, C): F frames of N tokens. Outside the temporal
// attention the video is sharded by frames (rank r holds frames
// split.range(F, sp, r), all their tokens), so spatial attention,
// cross-attention and every per-token op run without communication. The
// temporal attention needs all F frames of a token: one all-to-all turns the
// frame shard into a token shard (rank r holds tokens split.range(N, sp, r)
// of every frame) and one turns it back. The split is even, or by per-rank
// weights (parallel/shard.h), the same for frames and tokens. Uneven F and N are fine (a rank may
// even hold no frame or no token). Each rank sends rank j the block
// [b][its frames][j's tokens][C] and unpacks what it receives in place, all
// through ops::copy_rows and parallel/tensor_collectives.h, so any device or
// dtype works.
// VideoFrameShard is that layout for a batch of videos held frame by frame
// (Latte's residual stream: (B*F_me, N, C), one frame of one video per
// sample, in (video, frame) order): which frames this rank holds, the
// switch to the temporal attention's token shard and back, and every
// rank's frames gathered at the end.
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

// x (B, F_me, N, C), this rank's frames of `frames` -> (B, F, N_me, C), this
// rank's tokens of every frame. sp null or of size 1: x itself.
Tensor frames_to_tokens(Communicator* sp, const Tensor& x, int64_t frames, const Sharding& split = {});

// The inverse: x (B, F, N_me, C), this rank's tokens of `tokens` ->
// (B, F_me, N, C).
Tensor tokens_to_frames(Communicator* sp, const Tensor& x, int64_t tokens, const Sharding& split = {});

class VideoFrameShard {
 public:
  // Videos of `frames` frames of `tokens` tokens, their frames sharded over
  // sp by `split` (sp null or of size 1: every frame here). The
  // communicator must outlive the shard.
  VideoFrameShard(Communicator* sp, const Sharding& split, int64_t frames, int64_t tokens);

  // This rank's frames of each video.
  Range frames() const { return mine_; }
  // x (B*F_me, N, C), this rank's frames of B videos -> (B*F, N_me, C): every
  // frame of this rank's tokens (frames_to_tokens).
  Tensor to_tokens(const Tensor& x) const;
  // The inverse: x (B*F, N_me, C) -> (B*F_me, N, C) (tokens_to_frames).
  Tensor to_frames(const Tensor& x) const;
  // rows (B*F_me, N, R) -> (B*F, N, R): every rank's frames, on every rank.
  Tensor gather(const Tensor& rows) const;

 private:
  Communicator* sp_ = nullptr;
  Sharding split_;
  int64_t frames_ = 0, tokens_ = 0;
  Range mine_;
};

}  // namespace ditgen::parallel
