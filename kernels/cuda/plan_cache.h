// Plans built once per shape and reused: the key hashing and the cache that
// the cuDNN attention graphs (attention_cudnn.cpp, SdpaKey) and the cuBLASLt
// GEMM heuristics (gemm.cu, LtGemmKey) share. A key is a plain struct of
// integers with operator== and a hash built by hash_fields; the cache maps
// it to a plan, or remembers that none could be built (a negative entry), so
// a shape the library has no plan for is tried once, not on every call.
// Pure host code without CUDA: tests/cuda_host checks keys and the cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace ditgen::cuda {

// 64-bit mix of one value into a running hash (splitmix64's finaliser over
// the combination), so keys that differ in any one field hash apart.
constexpr uint64_t hash_mix(uint64_t h, uint64_t v) {
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

template <class... T>
constexpr uint64_t hash_fields(const T&... v) {
  uint64_t h = 0x84222325cbf29ce4ull;
  ((h = hash_mix(h, static_cast<uint64_t>(v))), ...);
  return h;
}

// A float's bits, so a key holding a scale compares and hashes exactly.
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Key -> shared plan, built at most once per key (also when the build
// fails: a null plan is cached and returned as "no plan"). Thread-safe;
// the build runs under the lock (plans are built during warm-up, rarely).
template <class Key, class Plan>
class PlanCache {
 public:
  struct Hash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.hash()); }
  };

  // The plan for `key`, built by build() -> std::shared_ptr<Plan> (null, or
  // an exception, meaning "no plan for this key") the first time.
  template <class Build>
  std::shared_ptr<Plan> get(const Key& key, Build&& build) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      ++hits_;
      return it->second;
    }
    ++builds_;
    std::shared_ptr<Plan> plan;
    try {
      plan = build();
    } catch (...) {
      plan = nullptr;
    }
    plans_.emplace(key, plan);
    return plan;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }
  size_t builds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return builds_;
  }
  size_t hits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<Plan>, Hash> plans_;
  size_t builds_ = 0, hits_ = 0;
};

// The largest power of two (capped at `cap`) dividing a device address:
// what the plan may assume about an operand's alignment (cuBLASLt's
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, cuDNN's 16-byte rule).
constexpr uint32_t address_alignment(uintptr_t address, uint32_t cap = 256) {
  uint32_t a = 1;
  while (a < cap && address % (uintptr_t{a} * 2) == 0) a *= 2;
  return a;
}

}  // namespace ditgen::cuda
