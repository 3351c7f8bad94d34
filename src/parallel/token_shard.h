// Token sharding for sequence parallelism (docs/design.md §4). A sequence of n
// tokens is split over `parts` ranks by a Sharding (parallel/shard.h): rank
// j holds tokens [split.range(n, parts, j)]: even shards, differing by at
// most one token when n does not divide, or shares by per-rank weights. Buffers the collectives move hold the shards
// packed one after the other in rank order, each shard as `rows` sequences
// of its P_j tokens of `width` elements: [j][row][P_j][width]. These
// functions only copy (ops::copy_rows), on any device and dtype.
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

// Tokens [r.begin, r.end) of every sample: (B, N, C) -> (B, r.size(), C)
// (x itself when r is all of it).
Tensor token_rows(const Tensor& x, Range r);

// whole [row][n][width] -> sharded [j][row][P_j][width] (the packed layout above).
void shard_tokens(const Tensor& whole, int64_t rows, int64_t n, int parts, int64_t width, Tensor& sharded,
                  const Sharding& split = {});
// sharded [j][row][P_j][width] -> whole [row][n][width].
void unshard_tokens(const Tensor& sharded, int64_t rows, int64_t n, int parts, int64_t width, Tensor& whole,
                    const Sharding& split = {});

// Every rank's token shard gathered into the whole sequence on every rank:
// shard (B, P_me, C), this rank's tokens of n -> (B, n, C). comm null or of
// size 1: the shard itself.
Tensor gather_tokens(Communicator* comm, const Tensor& shard, int64_t n, const Sharding& split = {});

}  // namespace ditgen::parallel
