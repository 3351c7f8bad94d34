#include "parallel/tensor_parallel.h"

#include <stdexcept>
#include <string>

#include "ops/ops.h"
#include "parallel/tensor_collectives.h"

namespace ditgen::parallel {

Range column_split(int64_t total, const Communicator* tp) {
  const int size = group_size(tp);
  if (total % size)
    throw std::invalid_argument("column_split: tp = " + std::to_string(size) + " does not divide " +
                                std::to_string(total) + " rows");
  const int64_t part = total / size;
  return {group_rank(tp) * part, (group_rank(tp) + 1) * part};
}

Tensor row_parallel_linear(Communicator* tp, const Tensor& x, const Tensor& w, const Tensor& bias) {
  return row_parallel_sum(tp, ops::linear(x, w, nullptr), bias);
}

Tensor row_parallel_sum(Communicator* tp, Tensor partial, const Tensor& bias) {
  if (group_size(tp) > 1) all_reduce_sum(*tp, partial);
  ops::add_broadcast_(partial, bias);
  return partial;
}

Tensor gather_chunk_columns(Communicator* tp, const Tensor& local, int64_t chunks) {
  const int size = group_size(tp);
  if (size == 1) return local;
  if (local.ndim() != 2 || chunks <= 0 || local.dim(1) % chunks)
    throw std::invalid_argument("gather_chunk_columns: local " + shape_str(local.shape()) + " in " +
                                std::to_string(chunks) + " chunks");
  const int64_t bsz = local.dim(0), dl = local.dim(1) / chunks, d = dl * size;
  // All-gather the (B, K*Dl) pieces, then put each rank's columns of each
  // chunk in place.
  Tensor pieces = Tensor::empty({size, bsz, chunks * dl}, local.device(), local.dtype());
  all_gather(*tp, local, pieces);
  Tensor out = Tensor::empty({bsz, chunks * d}, local.device(), local.dtype());
  for (int64_t r = 0; r < size; ++r)
    for (int64_t k = 0; k < chunks; ++k)
      ops::copy_rows(pieces, r * bsz * chunks * dl + k * dl, chunks * dl, out, k * d + r * dl, chunks * d, bsz, dl);
  return out;
}

}  // namespace ditgen::parallel
