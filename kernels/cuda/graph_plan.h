// The bookkeeping of CUDA Graphs capture and replay (cuda_graph.h runs it):
// which forward is run eagerly, which is captured, which replays a captured
// graph, and when a graph is dropped. Pure host code without CUDA, so
// tests/cuda_host checks the rules on a machine without a GPU.
//
// A forward is keyed by its input shapes and its pattern: what it computes
// this step (PAB's broadcast branches, a step cache's skip), since a graph
// replays exactly the kernels it captured. Rules:
// - a key runs eagerly for its first `warmup` forwards: the warm-up builds
//   cuBLASLt / cuDNN plans, fills the allocator's free lists and does the
//   host-side work (uploads, synchronisations) that cannot be captured;
// - the next forward of the key is captured (then launched), later ones
//   replay it, as long as the fixed input / output buffers the graph was
//   captured with (`io`, a signature of their addresses) are the same; other
//   buffers mean a new capture (the graph bakes in addresses);
// - a key whose capture failed runs eagerly for good;
// - at most `max_graphs` graphs are held, the least recently replayed
//   dropped first;
// - invalidate_all() drops every graph and every warm-up count (weights
//   reloaded, allocator cache released, TF32 switched, another device).
// Dropped graphs are listed by take_released() for the caller to destroy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kernels/cuda/plan_cache.h"

namespace ditgen::cuda {

struct GraphKey {
  std::vector<int64_t> shape;  // the forward's input shapes (and sizes), flattened
  uint64_t pattern = 0;        // what this forward computes (PAB / step-cache bits)

  bool operator==(const GraphKey&) const = default;
  uint64_t hash() const {
    uint64_t h = hash_fields(pattern, shape.size());
    for (int64_t v : shape) h = hash_mix(h, static_cast<uint64_t>(v));
    return h;
  }
};

struct GraphKeyHash {
  size_t operator()(const GraphKey& k) const { return static_cast<size_t>(k.hash()); }
};

enum class GraphAction { kEager, kCapture, kReplay };

constexpr const char* graph_action_name(GraphAction a) {
  switch (a) {
    case GraphAction::kEager: return "eager";
    case GraphAction::kCapture: return "capture";
    case GraphAction::kReplay: return "replay";
  }
  return "?";
}

struct GraphPolicy {
  int warmup = 2;         // eager forwards of a key before its capture
  size_t max_graphs = 8;  // graphs held at once
};

struct GraphStats {
  size_t eager = 0, captures = 0, replays = 0, capture_failures = 0, dropped = 0;
};

class GraphPlanner {
 public:
  explicit GraphPlanner(GraphPolicy policy = {}) : policy_(policy) {}

  // What to do for this forward of `key` whose fixed buffers have signature `io`.
  GraphAction plan(const GraphKey& key, uint64_t io) {
    if (failed_.count(key)) return eager();
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      if (it->second.io == io) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        ++stats_.replays;
        return GraphAction::kReplay;
      }
      drop(it);  // captured with other buffers: capture again
      return GraphAction::kCapture;
    }
    int& seen = seen_[key];
    if (seen < policy_.warmup) {
      ++seen;
      return eager();
    }
    return GraphAction::kCapture;
  }

  // After a kCapture: ok, the key now holds a graph bound to `io`; not ok,
  // the key runs eagerly from now on.
  void captured(const GraphKey& key, uint64_t io, bool ok) {
    if (auto it = graphs_.find(key); it != graphs_.end()) drop(it);
    if (!ok) {
      ++stats_.capture_failures;
      failed_.insert(key);
      return;
    }
    ++stats_.captures;
    lru_.push_front(key);
    graphs_.emplace(key, Held{io, lru_.begin()});
    while (graphs_.size() > policy_.max_graphs) drop(graphs_.find(lru_.back()));
  }

  void invalidate_all() {
    while (!graphs_.empty()) drop(graphs_.begin());
    seen_.clear();
    failed_.clear();
  }

  // Keys whose graphs were dropped since the last call (to destroy them).
  std::vector<GraphKey> take_released() { return std::exchange(released_, {}); }

  bool holds(const GraphKey& key) const { return graphs_.count(key) != 0; }
  size_t graphs() const { return graphs_.size(); }
  const GraphStats& stats() const { return stats_; }
  const GraphPolicy& policy() const { return policy_; }

 private:
  struct Held {
    uint64_t io;
    std::list<GraphKey>::iterator lru;
  };
  using Map = std::unordered_map<GraphKey, Held, GraphKeyHash>;

  GraphAction eager() {
    ++stats_.eager;
    return GraphAction::kEager;
  }
  void drop(Map::iterator it) {
    released_.push_back(it->first);
    lru_.erase(it->second.lru);
    graphs_.erase(it);
    ++stats_.dropped;
  }

  GraphPolicy policy_;
  Map graphs_;
  std::list<GraphKey> lru_;  // most recently used first
  std::unordered_map<GraphKey, int, GraphKeyHash> seen_;
  std::unordered_set<GraphKey, GraphKeyHash> failed_;
  std::vector<GraphKey> released_;
  GraphStats stats_;
};

}  // namespace ditgen::cuda
