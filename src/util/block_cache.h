// BlockCache: the bookkeeping of ditgen's caching allocators, free of CUDA:
// kernels/cuda/device.cpp instantiates it with cudaMalloc/cudaFree for
// device memory, tensor/device_memory.cpp with aligned_alloc/free for host
// tensors of 1 MiB and more (a freshly mapped block costs a page fault and a
// page zeroing per 4 KiB: a Latte-1-sized forward took 6.7 million of them
// and a fifth of its time). Unit-tested with malloc/free (tests/cuda_host/).
//
// Design: whole driver allocations ("blocks") are never split. A request is
// rounded up to its size class, then served from the free list of the
// smallest cached block of its class that fits (best fit,
// std::map::lower_bound) unless that block is twice the rounded request or
// more; otherwise the raw allocator is called. The denoising loop asks for the same sizes every
// step, so from the second step on every request is an exact hit and the
// driver is never called (cudaMalloc synchronises the device and is slow).
//
// Size classes:
//   <= 1 MiB: multiples of 512 B. Small buffers (norm statistics, per-head
//     scratch) vary a lot; 512 B keeps the waste tiny and the 256 B alignment
//     kernels rely on.
//   >  1 MiB: multiples of 2 MiB. The driver maps large allocations in 2 MiB
//     pages anyway, so this rounding costs no real memory, and activations
//     whose sizes differ slightly (uneven sequence shards, the last batch)
//     land in the same class and share blocks.
//
// Out of memory: the raw allocator returns nullptr; the cache then gives
// every cached block back and retries once, and only then throws
// RuntimeFailure naming the request and the statistics.
//
// Stream ordering: ditgen runs every kernel on one stream (device.h), so a
// block freed on the host while kernels that use it are still queued can be
// handed out again at once: the next user's kernels queue behind them on the
// same stream. A second stream would need events per block.
//
// Not thread-safe by itself; its users serialise calls with a mutex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/error.h"

namespace ditgen {

struct BlockCacheStats {
  size_t in_use = 0;         // bytes of blocks handed out (rounded sizes)
  size_t cached = 0;         // bytes of blocks held in the free lists
  size_t peak_in_use = 0;    // highest in_use so far
  size_t driver_allocs = 0;  // successful raw allocations so far
};

class BlockCache {
 public:
  // raw_alloc(bytes) returns nullptr when out of memory (and throws for any
  // other failure); raw_free(ptr) returns a block to the driver.
  using RawAlloc = std::function<void*(size_t)>;
  using RawFree = std::function<void(void*)>;

  static constexpr size_t kSmallLimit = size_t{1} << 20;  // 1 MiB
  static constexpr size_t kSmallStep = 512;
  static constexpr size_t kLargeStep = size_t{2} << 20;  // 2 MiB

  BlockCache(RawAlloc raw_alloc, RawFree raw_free, std::string memory_name = "device")
      : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)),
        memory_name_(std::move(memory_name)) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  // Blocks still in use are the owners' business (process exit frees them);
  // cached ones go back to the driver.
  ~BlockCache() { release_cached(); }

  static size_t rounded_size(size_t bytes) {
    const size_t step = bytes <= kSmallLimit ? kSmallStep : kLargeStep;
    return (bytes + step - 1) / step * step;
  }

  // nullptr for 0 bytes.
  void* allocate(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t size = rounded_size(bytes);
    void* ptr = take_cached(size);
    size_t block_size = size;
    if (ptr != nullptr) {
      block_size = cached_.at(ptr);
      cached_.erase(ptr);
      stats_.cached -= block_size;
    } else {
      ptr = allocate_from_driver(bytes, size);
    }
    in_use_.emplace(ptr, block_size);
    stats_.in_use += block_size;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
    return ptr;
  }

  // Back to the free list of its size; nullptr is ignored. A pointer that is
  // not in use (freed twice, or never from this cache) is a bug: it throws
  // std::invalid_argument and changes nothing.
  void deallocate(void* ptr) {
    if (ptr == nullptr) return;
    const auto it = in_use_.find(ptr);
    if (it == in_use_.end()) {
      throw std::invalid_argument(memory_name_ + " free of " + pointer_text(ptr) +
                                  (cached_.count(ptr) ? ": already freed (double free)"
                                                      : ": not allocated by this allocator"));
    }
    const size_t block_size = it->second;
    in_use_.erase(it);
    stats_.in_use -= block_size;
    free_lists_[block_size].push_back(ptr);
    cached_.emplace(ptr, block_size);
    stats_.cached += block_size;
  }

  // Every cached block back to the driver; blocks in use stay.
  void release_cached() {
    for (auto& [size, blocks] : free_lists_) {
      for (void* ptr : blocks) raw_free_(ptr);
    }
    free_lists_.clear();
    cached_.clear();
    stats_.cached = 0;
  }

  const BlockCacheStats& stats() const { return stats_; }

  // The size of the block behind a pointer in use (>= the bytes asked for).
  size_t block_size(const void* ptr) const {
    const auto it = in_use_.find(const_cast<void*>(ptr));
    if (it == in_use_.end()) {
      throw std::invalid_argument(memory_name_ + " pointer " + pointer_text(ptr) + " is not in use");
    }
    return it->second;
  }

 private:
  // The best-fitting cached block for a rounded request, removed from its
  // free list, or nullptr. The block must be of the same class and less than
  // twice the request: a bigger one would waste more than it serves, and a
  // fresh block costs one driver call only.
  void* take_cached(size_t size) {
    const auto it = free_lists_.lower_bound(size);
    if (it == free_lists_.end() || it->first >= 2 * size ||
        (it->first <= kSmallLimit) != (size <= kSmallLimit)) {
      return nullptr;
    }
    void* ptr = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_lists_.erase(it);
    return ptr;
  }

  void* allocate_from_driver(size_t bytes, size_t size) {
    void* ptr = raw_alloc_(size);
    if (ptr == nullptr) {
      const size_t released = stats_.cached;
      release_cached();
      ptr = raw_alloc_(size);
      if (ptr == nullptr) {
        throw RuntimeFailure("out of " + memory_name_ + " memory: cannot allocate " +
                             std::to_string(bytes) + " bytes (" + mib_text(size) +
                             " rounded) with " + mib_text(stats_.in_use) + " in use (peak " +
                             mib_text(stats_.peak_in_use) + ") after releasing " +
                             mib_text(released) + " cached, " +
                             std::to_string(stats_.driver_allocs) + " driver allocations so far");
      }
    }
    ++stats_.driver_allocs;
    return ptr;
  }

  static std::string mib_text(size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return text;
  }

  static std::string pointer_text(const void* ptr) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", ptr);
    return text;
  }

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  std::string memory_name_;
  std::map<size_t, std::vector<void*>> free_lists_;  // block size -> cached blocks
  std::unordered_map<void*, size_t> cached_;         // cached block -> its size
  std::unordered_map<void*, size_t> in_use_;         // block in use -> its size
  BlockCacheStats stats_;
};

}  // namespace ditgen
