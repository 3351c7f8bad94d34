// Even sharding of a count over ranks: the first (n % parts) ranks take one
// more. Sequence parallelism shards tokens this way, so a token count that
// does not divide evenly still runs, with shards differing by at most one.
#pragma once
#include <cstdint>

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

}  // namespace ditgen::parallel
