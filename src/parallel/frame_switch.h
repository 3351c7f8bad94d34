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
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

// x (B, F_me, N, C), this rank's frames of `frames` -> (B, F, N_me, C), this
// rank's tokens of every frame. sp null or of size 1: x itself.
Tensor frames_to_tokens(Communicator* sp, const Tensor& x, int64_t frames, const Sharding& split = {});

// The inverse: x (B, F, N_me, C), this rank's tokens of `tokens` ->
// (B, F_me, N, C).
Tensor tokens_to_frames(Communicator* sp, const Tensor& x, int64_t tokens, const Sharding& split = {});

}  // namespace ditgen::parallel
