// Pyramid Attention Broadcast (docs/design.md §5): per block and attention kind,
// reuse the output computed at an earlier step instead of recomputing it.
//
// Rule, once per denoising step for each configured (block, kind), with t
// the scheduler timestep and `count` the number of steps since the
// generation started at which the block ran (a step cache's skipped span
// does not count: docs/design.md §8, "PAB counts only the steps that run"):
//     reuse = lo < t < hi  and  count % range != 0
//     a computed output is kept iff the next step's t lies inside (lo, hi)
// so a kept output exists whenever reuse is true, and nothing is held outside
// the window. Both CFG halves (and every rank of a layout) see the same steps
// and therefore make the same decisions.
//
// This layer knows no model: a model asks reuse()/keep(), hands over the
// output it computed (already after its closing all-to-all / all-reduce, so
// a reuse skips that communication) and reports the bytes that computing it
// sent, which a reuse then counts as skipped.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::pab {

enum class Kind { kSpatial = 0, kTemporal = 1, kCross = 2, kMlp = 3 };
constexpr int kKinds = 4;
const char* kind_name(Kind k);  // "spatial", "temporal", "cross", "mlp"

struct KindSchedule {
  bool configured = false;
  int range = 1;
  double lo = 0, hi = 0;     // strict window lo < t < hi
  std::vector<int> blocks;  // mlp: the blocks broadcast; other kinds: every block
};

struct Schedule {
  std::array<KindSchedule, kKinds> kinds;
  bool enabled() const;
  const KindSchedule& operator[](Kind k) const { return kinds[static_cast<int>(k)]; }
  KindSchedule& operator[](Kind k) { return kinds[static_cast<int>(k)]; }
};

struct KindStats {
  int64_t computed = 0;  // (block, step) outputs computed
  int64_t reused = 0;    // (block, step) outputs broadcast from the cache
  int64_t comm_bytes_skipped = 0;
};

class ChangeRecorder;

class BroadcastCache {
 public:
  BroadcastCache(Schedule schedule, int num_blocks);
  // Also report every computed output (configured or not) to `recorder`
  // (--pab-analyze); it must outlive the cache.
  void set_recorder(ChangeRecorder* recorder) { recorder_ = recorder; }

  // Starts the next denoising step at timestep t; next_t is the following
  // step's timestep (none after the last step).
  void begin_step(double t, std::optional<double> next_t);

  // Outputs are keyed by (block, kind, part): `part` tells apart the
  // branches of one kind that a layer holds more than once (Latte: part 0
  // is the layer's spatial block, part 1 its temporal block, each with its
  // own feed-forward); `block` is the layer index that the schedule's
  // mlp.blocks list and the block count refer to.
  bool reuse(int block, Kind kind, int part = 0) const;
  // The output kept for (block, kind, part); only valid when reuse() is true.
  const Tensor& cached(int block, Kind kind, int part = 0) const;
  // A computed output: counted, and kept (copied) when the next step may
  // reuse it; `comm_bytes` is what computing it sent.
  void computed(int block, Kind kind, const Tensor& output, int64_t comm_bytes, int part = 0);
  // A reused output: counted, with the bytes its computation last sent.
  void reused(int block, Kind kind, int part = 0);

  // A step cache skipped layers [first, last) at this step: their count
  // does not advance (pab/step_cache.h).
  void skipped_layers(int first, int last);

  // Drops every kept output (end of a generation).
  void release();

  const Schedule& schedule() const { return schedule_; }
  const KindStats& stats(Kind k) const { return stats_[static_cast<int>(k)]; }
  int64_t cache_bytes() const { return bytes_; }
  int64_t cache_peak_bytes() const { return peak_bytes_; }

 private:
  bool applies(int block, Kind kind) const;
  bool in_window(Kind kind, double t) const;

  Schedule schedule_;
  int num_blocks_;
  ChangeRecorder* recorder_ = nullptr;
  int count_ = -1;  // step number of the current step
  int block_count(int block) const { return count_ - skipped_[static_cast<size_t>(block)]; }
  std::vector<int> skipped_;  // per block: the steps a step cache skipped it
  double t_ = 0;
  std::optional<double> next_t_;
  struct Entry {
    Tensor output;
    int64_t comm_bytes = 0;
  };
  using Key = std::tuple<int, int, int>;  // (block, kind, part)
  std::map<Key, Entry> entries_;          // -> kept output
  std::array<KindStats, kKinds> stats_{};
  int64_t bytes_ = 0, peak_bytes_ = 0;
};

// Adds `more` into `total` (summary over several generations/batches).
void accumulate(std::array<KindStats, kKinds>& total, const BroadcastCache& cache);

}  // namespace ditgen::pab
