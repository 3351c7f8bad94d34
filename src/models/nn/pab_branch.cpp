#include "models/nn/pab_branch.h"

namespace ditgen::models::nn {

Tensor PabSite::branch(pab::Kind kind, const ShardGroups& groups, const std::function<Tensor()>& compute) const {
  if (cache && cache->reuse(block, kind, part)) {
    Tensor kept = cache->cached(block, kind, part);
    cache->reused(block, kind, part);
    return kept;
  }
  const int64_t sent_before = groups.sent_bytes();
  Tensor out = compute();
  if (cache) cache->computed(block, kind, out, groups.sent_bytes() - sent_before, part);
  return out;
}

}  // namespace ditgen::models::nn
