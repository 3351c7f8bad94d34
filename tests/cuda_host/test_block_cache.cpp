// BlockCache, the bookkeeping of the CUDA caching allocator, on host memory:
// a fake driver (malloc/free with a capacity, counting its calls) stands in
// for cudaMalloc/cudaFree, so size classes, reuse, statistics, the
// out-of-memory retry and misuse detection are all checked without a GPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/block_cache.h"
#include "util/error.h"

using ditgen::BlockCache;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// A "device" of `capacity` bytes: allocation fails (nullptr) beyond it.
struct FakeDriver {
  size_t capacity = 1024 * MiB;
  size_t used = 0;
  int allocs = 0, frees = 0, failures = 0;
  std::unordered_map<void*, size_t> live;

  void* alloc(size_t bytes) {
    if (used + bytes > capacity) {
      ++failures;
      return nullptr;
    }
    void* p = std::malloc(bytes);
    REQUIRE(p != nullptr);
    live[p] = bytes;
    used += bytes;
    ++allocs;
    return p;
  }
  void free(void* p) {
    REQUIRE(live.count(p) == 1);
    used -= live[p];
    live.erase(p);
    std::free(p);
    ++frees;
  }
  BlockCache::RawAlloc alloc_fn() { return [this](size_t n) { return alloc(n); }; }
  BlockCache::RawFree free_fn() { return [this](void* p) { free(p); }; }
};

// A stand-in for one denoising step: activations of a few sizes, some
// alive at once, freed in an order unlike the allocation order.
void denoising_step(BlockCache& cache) {
  void* latents = cache.allocate(4 * MiB + 100);
  void* stats = cache.allocate(700);
  void* qkv = cache.allocate(12 * MiB);
  void* scores = cache.allocate(3 * MiB);
  cache.deallocate(stats);
  void* mlp = cache.allocate(16 * MiB);
  cache.deallocate(qkv);
  cache.deallocate(scores);
  void* out = cache.allocate(4 * MiB);
  cache.deallocate(mlp);
  cache.deallocate(out);
  cache.deallocate(latents);
}

}  // namespace

TEST_CASE("block cache: size classes are 512 B up to 1 MiB, 2 MiB above") {
  CHECK(BlockCache::rounded_size(1) == 512);
  CHECK(BlockCache::rounded_size(512) == 512);
  CHECK(BlockCache::rounded_size(513) == 1024);
  CHECK(BlockCache::rounded_size(1 * MiB) == 1 * MiB);
  CHECK(BlockCache::rounded_size(1 * MiB + 1) == 2 * MiB);
  CHECK(BlockCache::rounded_size(3 * MiB) == 4 * MiB);
  CHECK(BlockCache::rounded_size(4 * MiB) == 4 * MiB);
}

TEST_CASE("block cache: a repeated step reuses every block, the driver is called once per block") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  denoising_step(cache);
  const size_t first_step_allocs = cache.stats().driver_allocs;
  CHECK(first_step_allocs == static_cast<size_t>(driver.allocs));
  CHECK(cache.stats().in_use == 0);
  CHECK(cache.stats().cached == driver.used);

  for (int step = 0; step < 3; ++step) denoising_step(cache);
  CHECK(cache.stats().driver_allocs == first_step_allocs);
  CHECK(driver.allocs == static_cast<int>(first_step_allocs));
  CHECK(driver.frees == 0);
  CHECK(cache.stats().in_use == 0);
}

TEST_CASE("block cache: in_use, cached and peak count rounded block bytes") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  void* a = cache.allocate(1000);        // 1 KiB block
  void* b = cache.allocate(3 * MiB);     // 4 MiB block
  CHECK(cache.block_size(a) == 1 * KiB);
  CHECK(cache.stats().in_use == 4 * MiB + 1 * KiB);
  cache.deallocate(b);
  CHECK(cache.stats().in_use == 1 * KiB);
  CHECK(cache.stats().cached == 4 * MiB);
  void* c = cache.allocate(2 * MiB);     // new 2 MiB block: 4 MiB is >= twice the request
  CHECK(cache.stats().in_use == 2 * MiB + 1 * KiB);
  CHECK(cache.stats().peak_in_use == 4 * MiB + 1 * KiB);
  cache.deallocate(a);
  cache.deallocate(c);
  CHECK(cache.stats().in_use == 0);
  CHECK(cache.stats().peak_in_use == 4 * MiB + 1 * KiB);
  CHECK(cache.stats().cached == 4 * MiB + 2 * MiB + 1 * KiB);
  CHECK(cache.stats().driver_allocs == 3);
}

TEST_CASE("block cache: best fit within the class, at most twice the request") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  void* b4 = cache.allocate(4 * MiB);
  void* b8 = cache.allocate(8 * MiB);
  void* s2 = cache.allocate(2 * KiB);
  cache.deallocate(b4);
  cache.deallocate(b8);
  cache.deallocate(s2);
  REQUIRE(driver.allocs == 3);

  void* x = cache.allocate(5 * MiB);  // rounded 6 MiB: the 8 MiB block fits (< 12 MiB)
  CHECK(x == b8);
  void* y = cache.allocate(3 * MiB + 5);  // rounded 4 MiB: the 4 MiB block, exactly
  CHECK(y == b4);
  void* z = cache.allocate(1500);  // rounded 1.5 KiB: the 2 KiB block (< 3 KiB)
  CHECK(z == s2);
  CHECK(driver.allocs == 3);
  CHECK(cache.stats().in_use == 8 * MiB + 4 * MiB + 2 * KiB);
  cache.deallocate(x);
  cache.deallocate(y);
  cache.deallocate(z);

  // Too big for the request: fresh blocks.
  void* small = cache.allocate(1 * KiB);   // 2 KiB cached: not < 2 x 1 KiB
  void* mib = cache.allocate(1 * MiB);     // a small request never takes a large block
  void* two = cache.allocate(2 * MiB);     // 4 and 8 MiB cached: not < 4 MiB
  CHECK(driver.allocs == 6);
  cache.deallocate(small);
  cache.deallocate(mib);
  cache.deallocate(two);
}

TEST_CASE("block cache: release_cached returns cached blocks only") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  void* kept = cache.allocate(5 * MiB);
  void* dropped1 = cache.allocate(3 * MiB);
  void* dropped2 = cache.allocate(100);
  cache.deallocate(dropped1);
  cache.deallocate(dropped2);
  cache.release_cached();
  CHECK(driver.frees == 2);
  CHECK(cache.stats().cached == 0);
  CHECK(cache.stats().in_use == 6 * MiB);
  CHECK(driver.used == 6 * MiB);
  void* again = cache.allocate(3 * MiB);  // the driver again
  CHECK(driver.allocs == 4);
  cache.deallocate(again);
  cache.deallocate(kept);
  CHECK(cache.stats().cached == 10 * MiB);
}

TEST_CASE("block cache: on out of memory, cached blocks go back and the allocation is retried") {
  FakeDriver driver;
  driver.capacity = 12 * MiB;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  void* a = cache.allocate(6 * MiB);
  void* b = cache.allocate(2 * MiB);
  cache.deallocate(a);  // 6 MiB cached, 2 MiB in use
  void* c = cache.allocate(8 * MiB);  // 2 + 6 + 8 > 12: fails once, then fits
  CHECK(c != nullptr);
  CHECK(driver.failures == 1);
  CHECK(driver.frees == 1);
  CHECK(cache.stats().cached == 0);
  CHECK(cache.stats().in_use == 10 * MiB);
  CHECK(cache.stats().driver_allocs == 3);
  cache.deallocate(b);
  cache.deallocate(c);
}

TEST_CASE("block cache: out of memory after the retry throws RuntimeFailure with the numbers") {
  FakeDriver driver;
  driver.capacity = 10 * MiB;
  BlockCache cache(driver.alloc_fn(), driver.free_fn(), "CUDA device");
  void* a = cache.allocate(8 * MiB);
  void* b = cache.allocate(1 * MiB);
  cache.deallocate(b);  // 1 MiB cached
  try {
    cache.allocate(3 * MiB);
    FAIL("expected RuntimeFailure");
  } catch (const ditgen::RuntimeFailure& e) {
    const std::string message = e.what();
    CHECK(e.exit_code() == ditgen::kExitRuntime);
    CHECK(message.find("out of CUDA device memory") != std::string::npos);
    CHECK(message.find(std::to_string(3 * MiB) + " bytes") != std::string::npos);
    CHECK(message.find("8.0 MiB in use") != std::string::npos);
    CHECK(message.find("after releasing 1.0 MiB cached") != std::string::npos);
  }
  CHECK(driver.failures == 2);
  CHECK(cache.stats().in_use == 8 * MiB);
  cache.deallocate(a);
}

TEST_CASE("block cache: double free and foreign pointers throw and change nothing") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  void* a = cache.allocate(1000);
  cache.deallocate(a);
  const auto before = cache.stats();
  CHECK_THROWS_WITH_AS(cache.deallocate(a), doctest::Contains("double free"), std::invalid_argument);
  int local = 0;
  CHECK_THROWS_WITH_AS(cache.deallocate(&local), doctest::Contains("not allocated by this allocator"),
                       std::invalid_argument);
  CHECK(cache.stats().cached == before.cached);
  CHECK(cache.stats().in_use == before.in_use);
  // The block is still cached, and handed out exactly once.
  void* again = cache.allocate(1000);
  void* fresh = cache.allocate(1000);
  CHECK(again == a);
  CHECK(fresh != a);
  cache.deallocate(again);
  cache.deallocate(fresh);
}

TEST_CASE("block cache: zero bytes is nullptr, freeing nullptr does nothing") {
  FakeDriver driver;
  BlockCache cache(driver.alloc_fn(), driver.free_fn());
  CHECK(cache.allocate(0) == nullptr);
  cache.deallocate(nullptr);
  CHECK(driver.allocs == 0);
  CHECK(cache.stats().in_use == 0);
}

TEST_CASE("block cache: destroying the cache frees its cached blocks") {
  FakeDriver driver;
  {
    BlockCache cache(driver.alloc_fn(), driver.free_fn());
    cache.deallocate(cache.allocate(3 * MiB));
    cache.deallocate(cache.allocate(100));
  }
  CHECK(driver.frees == 2);
  CHECK(driver.used == 0);
}
