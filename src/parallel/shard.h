// How the ranks of one axis share a count (tokens, frames, layers). Evenly:
// the first (n % parts) ranks take one more, so a count that does not divide
// still runs, with shards differing by at most one. Or in proportion to
// integer per-rank weights (parallel.sp_weights, for machines of mixed
// capacity): rank j's share is floor(n * w_j / W) with W the weights' sum,
// and what is left goes one each to the ranks with the largest remainders
// (ties: the lower rank). Equal weights give the even shards exactly. Shards
// are contiguous and in rank order.
#pragma once
#include <cstdint>
#include <vector>

namespace ditgen::parallel {

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

inline Range even_shard(int64_t n, int parts, int index) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = index * base + (index < extra ? index : extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

// The sizes of n shared by weights (each >= 1) as described above.
std::vector<int64_t> weighted_sizes(int64_t n, const std::vector<int64_t>& weights);

class Sharding {
 public:
  Sharding() = default;  // even
  // One weight (>= 1) per rank of the axis; empty = even.
  explicit Sharding(std::vector<int64_t> weights);

  // Rank `index`'s shard of n over `parts` ranks (parts must equal the
  // number of weights, when there are weights).
  Range range(int64_t n, int parts, int index) const;
  int64_t size(int64_t n, int parts, int index) const { return range(n, parts, index).size(); }
  // The largest shard of n.
  int64_t largest(int64_t n, int parts) const;
  bool even() const { return weights_.empty(); }
  const std::vector<int64_t>& weights() const { return weights_; }

 private:
  std::vector<int64_t> weights_;
};

}  // namespace ditgen::parallel
