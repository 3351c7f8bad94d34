// The host caching allocator behind Tensor (tensor/device_memory.cpp): a
// tensor of 1 MiB or more freed and asked for again gets the same block
// back (no allocation, no fresh pages: what a denoising loop does every
// step), smaller ones do not go through it, and release_cached_host gives
// the cached blocks back. Under AddressSanitizer the cache is off (every
// block really freed, so use-after-free is caught), and this test says so.
#include <doctest/doctest.h>

#include "tensor/device_memory.h"
#include "tensor/tensor.h"

using namespace ditgen;

TEST_CASE("host tensors of 1 MiB and more reuse their blocks, until the cache is released") {
  if (!device_memory::host_cache_enabled()) {
    MESSAGE("built with AddressSanitizer: the host cache is off");
    CHECK(device_memory::cached_host_bytes() == 0);
    return;
  }
  device_memory::release_cached_host();
  const void* first = nullptr;
  {
    Tensor a = Tensor::empty({3, 1 << 18});  // 3 MiB
    first = a.raw();
  }
  CHECK(device_memory::cached_host_bytes() >= (size_t{3} << 20));
  {
    Tensor b = Tensor::empty({3, 1 << 18});  // the same size: the same block
    CHECK(b.raw() == first);
    CHECK(device_memory::cached_host_bytes() == 0);
    Tensor c = Tensor::empty({5, 1 << 18});  // 5 MiB: a 6 MiB block of its own
    CHECK(c.raw() != first);
    c[0] = 1.0f;  // usable memory
    CHECK(reinterpret_cast<uintptr_t>(c.raw()) % 64 == 0);
  }
  const size_t cached = device_memory::cached_host_bytes();
  CHECK(cached >= (size_t{9} << 20));
  {
    Tensor small = Tensor::empty({1000});  // under 1 MiB: not cached
    (void)small;
  }
  CHECK(device_memory::cached_host_bytes() == cached);
  device_memory::release_cached_host();
  CHECK(device_memory::cached_host_bytes() == 0);
}
