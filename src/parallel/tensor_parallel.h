// Tensor parallelism (Megatron-style, docs/design.md §4) over a tp group (null =
// size 1). A column-split linear (QKV, MLP input, each adaLN chunk) keeps
// rows column_split(total) of the weight: this rank's heads / features,
// computed with no communication. A row-split linear (attention output, MLP
// output) keeps the matching input columns; its partial products are summed
// by one all-reduce and the bias, held whole, is added once after it. A
// modulation made of K column-split chunks (adaLN: K = 6) is all-gathered and
// reassembled so every rank holds all K chunks whole.
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/shard.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

inline int group_size(const Communicator* c) { return c ? c->size() : 1; }
inline int group_rank(const Communicator* c) { return c ? c->rank() : 0; }

// This rank's rows [r * total/tp, (r + 1) * total/tp) of a column-split
// layer with `total` output rows (tp must divide total: checked).
Range column_split(int64_t total, const Communicator* tp);

// y (B, P, N) = x (B, P, Kl) w (N, Kl)^T summed over the tp ranks, plus
// bias (N) once: the row-split half of a tp pair.
Tensor row_parallel_linear(Communicator* tp, const Tensor& x, const Tensor& w, const Tensor& bias);
// Its second half: this rank's partial sums (B, P, N) summed over the tp
// ranks, then bias (N) added once.
Tensor row_parallel_sum(Communicator* tp, Tensor partial, const Tensor& bias);

// local (B, K*Dl): this rank's Dl = D/tp columns of each of K chunks of
// width D, side by side -> (B, K*D) with every chunk whole:
// out[b][k*D + r*Dl + j] = rank r's local[b][k*Dl + j]. tp null or 1: local.
Tensor gather_chunk_columns(Communicator* tp, const Tensor& local, int64_t chunks);

}  // namespace ditgen::parallel
