// The Pyramid Attention Broadcast wrapper every family puts around a
// block's branches (docs/design.md §5; the schedule and the kept outputs are
// pab/broadcast.h's). A branch is what a block adds to its residual stream
// from one attention or feed-forward, after its output projection and
// all-reduce (or closing all-to-all) and before its gate. When the cache
// says reuse, the kept output stands in for the whole computation, its
// communication included; otherwise the branch is computed, and the cache
// keeps it (when the next step may reuse it) with the bytes this rank sent
// meanwhile, which a later reuse counts as skipped.
#pragma once
#include <functional>

#include "models/shard_groups.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// Where one block's branches are cached.
struct PabSite {
  pab::BroadcastCache* cache = nullptr;  // null: PAB off, every branch computed
  int block = 0;                         // the layer index (what pab.mlp.blocks lists)
  // Which of the layer's blocks (pab/broadcast.h's part): Latte's temporal
  // block is part 1, so its feed-forward is kept apart from the spatial one's.
  int part = 0;

  // The branch of `kind` here: the kept output, or compute()'s, whose
  // bytes sent through `groups` are charged to it.
  Tensor branch(pab::Kind kind, const ShardGroups& groups, const std::function<Tensor()>& compute) const;
};

}  // namespace ditgen::models::nn
