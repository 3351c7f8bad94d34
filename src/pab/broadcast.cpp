#include "pab/broadcast.h"

#include "pab/change_recorder.h"

#include <algorithm>
#include <stdexcept>

namespace ditgen::pab {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kSpatial: return "spatial";
    case Kind::kTemporal: return "temporal";
    case Kind::kCross: return "cross";
    case Kind::kMlp: return "mlp";
  }
  return "?";
}

bool Schedule::enabled() const {
  return std::any_of(kinds.begin(), kinds.end(), [](const KindSchedule& k) { return k.configured; });
}

BroadcastCache::BroadcastCache(Schedule schedule, int num_blocks)
    : schedule_(std::move(schedule)), num_blocks_(num_blocks), skipped_(static_cast<size_t>(std::max(num_blocks, 0)), 0) {}

void BroadcastCache::skipped_layers(int first, int last) {
  for (int b = std::max(first, 0); b < std::min(last, num_blocks_); ++b) ++skipped_[static_cast<size_t>(b)];
}

void BroadcastCache::begin_step(double t, std::optional<double> next_t) {
  ++count_;
  if (recorder_) recorder_->begin_step(count_, t);
  t_ = t;
  next_t_ = next_t;
}

bool BroadcastCache::applies(int block, Kind kind) const {
  const KindSchedule& k = schedule_[kind];
  if (!k.configured || block < 0 || block >= num_blocks_) return false;
  return kind != Kind::kMlp || std::find(k.blocks.begin(), k.blocks.end(), block) != k.blocks.end();
}

bool BroadcastCache::in_window(Kind kind, double t) const {
  const KindSchedule& k = schedule_[kind];
  return k.lo < t && t < k.hi;
}

bool BroadcastCache::reuse(int block, Kind kind, int part) const {
  if (count_ < 0 || !applies(block, kind)) return false;
  return in_window(kind, t_) && block_count(block) % schedule_[kind].range != 0 &&
         entries_.count({block, static_cast<int>(kind), part});
}

const Tensor& BroadcastCache::cached(int block, Kind kind, int part) const {
  auto it = entries_.find({block, static_cast<int>(kind), part});
  if (it == entries_.end()) throw std::logic_error("pab: no cached output for this block and kind");
  return it->second.output;
}

void BroadcastCache::computed(int block, Kind kind, const Tensor& output, int64_t comm_bytes, int part) {
  if (recorder_) recorder_->record(block, kind, output, part);
  if (!applies(block, kind)) return;
  ++stats_[static_cast<int>(kind)].computed;
  const Key key{block, static_cast<int>(kind), part};
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    bytes_ -= static_cast<int64_t>(it->second.output.nbytes());
    entries_.erase(it);
  }
  if (next_t_ && in_window(kind, *next_t_)) {
    entries_[key] = Entry{output.clone(), comm_bytes};
    bytes_ += static_cast<int64_t>(output.nbytes());
    peak_bytes_ = std::max(peak_bytes_, bytes_);
  }
}

void BroadcastCache::reused(int block, Kind kind, int part) {
  const Key key{block, static_cast<int>(kind), part};
  KindStats& s = stats_[static_cast<int>(kind)];
  ++s.reused;
  s.comm_bytes_skipped += entries_.at(key).comm_bytes;
  // Past the window's end nothing is held: drop it when the next step
  // cannot use it.
  if (!next_t_ || !in_window(kind, *next_t_)) {
    bytes_ -= static_cast<int64_t>(entries_.at(key).output.nbytes());
    entries_.erase(key);
  }
}

void BroadcastCache::release() {
  entries_.clear();
  bytes_ = 0;
}

void accumulate(std::array<KindStats, kKinds>& total, const BroadcastCache& cache) {
  for (int k = 0; k < kKinds; ++k) {
    total[k].computed += cache.stats(static_cast<Kind>(k)).computed;
    total[k].reused += cache.stats(static_cast<Kind>(k)).reused;
    total[k].comm_bytes_skipped += cache.stats(static_cast<Kind>(k)).comm_bytes_skipped;
  }
}

}  // namespace ditgen::pab
