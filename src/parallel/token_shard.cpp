#include "parallel/token_shard.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "parallel/tensor_collectives.h"

namespace ditgen::parallel {

Tensor token_rows(const Tensor& x, Range r) {
  const int64_t bsz = x.dim(0), n = x.dim(1), c = x.dim(2);
  if (r.begin == 0 && r.end == n) return x;
  Tensor y = Tensor::empty({bsz, r.size(), c}, x.device(), x.dtype());
  ops::copy_rows(x, r.begin * c, n * c, y, 0, r.size() * c, bsz, r.size() * c);
  return y;
}

namespace {

// Copies each part j's tokens split.range(n, parts, j) of every row between
// `whole` (rows of n tokens of `width`) and `sharded` (part after part,
// each its rows of its tokens), in the direction `to_shards` says.
void copy_token_shards(const Tensor& from, Tensor& to, bool to_shards, int64_t rows, int64_t n, int parts,
                       int64_t width, const Sharding& split) {
  int64_t offset = 0;  // where part j starts in the sharded tensor
  for (int j = 0; j < parts; ++j) {
    const Range r = split.range(n, parts, j);
    const int64_t len = r.size() * width;
    if (to_shards)
      ops::copy_rows(from, r.begin * width, n * width, to, offset, len, rows, len);
    else
      ops::copy_rows(from, offset, len, to, r.begin * width, n * width, rows, len);
    offset += rows * len;
  }
}

}  // namespace

void shard_tokens(const Tensor& whole, int64_t rows, int64_t n, int parts, int64_t width, Tensor& sharded,
                  const Sharding& split) {
  copy_token_shards(whole, sharded, true, rows, n, parts, width, split);
}

void unshard_tokens(const Tensor& sharded, int64_t rows, int64_t n, int parts, int64_t width, Tensor& whole,
                    const Sharding& split) {
  copy_token_shards(sharded, whole, false, rows, n, parts, width, split);
}

Tensor gather_tokens(Communicator* comm, const Tensor& shard, int64_t n, const Sharding& split) {
  const int parts = comm ? comm->size() : 1;
  if (parts == 1) return shard;
  if (shard.ndim() != 3 || shard.dim(1) != split.size(n, parts, comm->rank()))
    throw std::invalid_argument("gather_tokens: shard " + shape_str(shard.shape()) + " is not rank " +
                                std::to_string(comm->rank()) + "'s tokens of " + std::to_string(n));
  const int64_t bsz = shard.dim(0), width = shard.dim(2);
  std::vector<int64_t> counts(parts);
  for (int j = 0; j < parts; ++j) counts[j] = bsz * split.size(n, parts, j) * width;
  Tensor gathered = Tensor::empty({bsz * n * width}, shard.device(), shard.dtype());
  all_gather_v(*comm, shard, gathered, counts);
  Tensor whole = Tensor::empty({bsz, n, width}, shard.device(), shard.dtype());
  unshard_tokens(gathered, bsz, n, parts, width, whole, split);
  return whole;
}

}  // namespace ditgen::parallel
