#include "parallel/shard.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace ditgen::parallel {

std::vector<int64_t> weighted_sizes(int64_t n, const std::vector<int64_t>& weights) {
  if (weights.empty() || n < 0) throw std::invalid_argument("weighted_sizes: no weights or a negative count");
  for (int64_t w : weights)
    if (w < 1) throw std::invalid_argument("weighted_sizes: weight " + std::to_string(w) + " is not >= 1");
  const int64_t total = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  const size_t parts = weights.size();
  std::vector<int64_t> size(parts), remainder(parts);
  int64_t given = 0;
  for (size_t j = 0; j < parts; ++j) {
    size[j] = n * weights[j] / total;  // integer arithmetic: the same on every rank and machine
    remainder[j] = n * weights[j] % total;
    given += size[j];
  }
  std::vector<size_t> order(parts);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (int64_t left = n - given, i = 0; left > 0; --left, ++i) ++size[order[static_cast<size_t>(i)]];
  return size;
}

Sharding::Sharding(std::vector<int64_t> weights) : weights_(std::move(weights)) {
  for (int64_t w : weights_)
    if (w < 1) throw std::invalid_argument("Sharding: weight " + std::to_string(w) + " is not >= 1");
}

Range Sharding::range(int64_t n, int parts, int index) const {
  if (weights_.empty()) return even_shard(n, parts, index);
  if (static_cast<size_t>(parts) != weights_.size() || index < 0 || index >= parts)
    throw std::invalid_argument("Sharding: shard " + std::to_string(index) + " of " + std::to_string(parts) +
                                " with " + std::to_string(weights_.size()) + " weights");
  const std::vector<int64_t> sizes = weighted_sizes(n, weights_);
  const int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + index, int64_t{0});
  return {begin, begin + sizes[static_cast<size_t>(index)]};
}

int64_t Sharding::largest(int64_t n, int parts) const {
  int64_t m = 0;
  for (int j = 0; j < parts; ++j) m = std::max(m, size(n, parts, j));
  return m;
}

}  // namespace ditgen::parallel
