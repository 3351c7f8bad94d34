// Device storage for Tensor: aligned host memory (blocks of 1 MiB and more
// through a caching allocator, util/block_cache.h), and with the CUDA
// backend the caching allocator of kernels/cuda/device.h plus its copy and
// cast primitives. The only file of the tensor layer with a DITGEN_WITH_CUDA branch.
// Host-side conversion is convert_host (tensor/convert.h); a host <-> device
// copy moves the bytes in the host tensor's dtype and casts on the device.
#include "tensor/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tensor/convert.h"
#include "util/block_cache.h"
#include "util/error.h"

#ifdef DITGEN_WITH_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#endif

namespace ditgen::device_memory {

namespace {

// Host blocks of kHostCacheMin bytes and more are kept for reuse when their
// tensor goes: a model asks for the same sizes every denoising step, so
// from the second step on no large tensor costs an allocation (nor the
// page faults and zeroing of freshly mapped memory). Not under
// AddressSanitizer, whose use-after-free checks need every block really
// freed.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHostCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kHostCache = false;
#else
constexpr bool kHostCache = true;
#endif
#else
constexpr bool kHostCache = true;
#endif
constexpr size_t kHostCacheMin = size_t{1} << 20;

struct HostCache {
  std::mutex mutex;
  // aligned_alloc returns null when out of memory: the cache then releases
  // what it holds and retries once (BlockCache).
  BlockCache cache{[](size_t n) { return std::aligned_alloc(64, n); }, [](void* p) { std::free(p); }, "host"};
};

HostCache& host_cache() {
  static HostCache* c = new HostCache;  // never destroyed: tensors may outlive static destruction
  return *c;
}

std::shared_ptr<void> allocate_host(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (kHostCache && rounded >= kHostCacheMin) {
    HostCache& c = host_cache();
    void* p = nullptr;
    try {
      const std::lock_guard<std::mutex> lock(c.mutex);
      p = c.cache.allocate(rounded);  // block sizes are multiples of 512 B or 2 MiB: aligned_alloc takes them
    } catch (const RuntimeFailure&) {
      throw std::bad_alloc();  // Tensor::empty names the tensor and the stage
    }
    return std::shared_ptr<void>(p, [](void* q) {
      HostCache& hc = host_cache();
      const std::lock_guard<std::mutex> lock(hc.mutex);
      hc.cache.deallocate(q);
    });
  }
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw std::bad_alloc();  // Tensor::empty names the tensor and the stage
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

[[noreturn]] void no_cuda() {
  throw RuntimeFailure("this ditgen was built without the CUDA backend (configure with -DDITGEN_CUDA=ON on a "
                       "machine with the CUDA toolkit); use --device cpu");
}

}  // namespace

bool cuda_built() {
#ifdef DITGEN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::shared_ptr<void> allocate(Device device, size_t bytes) {
  if (device == Device::kCPU) return allocate_host(bytes);
#ifdef DITGEN_WITH_CUDA
  void* p = cuda::device_alloc(bytes ? bytes : 256);
  return std::shared_ptr<void>(p, [](void* q) { cuda::device_free(q); });
#else
  no_cuda();
#endif
}

void release_cached_host() {
  if (!kHostCache) return;
  HostCache& c = host_cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.cache.release_cached();
}

bool host_cache_enabled() { return kHostCache; }

size_t cached_host_bytes() {
  if (!kHostCache) return 0;
  HostCache& c = host_cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  return c.cache.stats().cached;
}

void fill_zero(Device device, void* ptr, size_t bytes) {
  if (bytes == 0) return;
  if (device == Device::kCPU) {
    std::memset(ptr, 0, bytes);
    return;
  }
#ifdef DITGEN_WITH_CUDA
  cuda::fill_zero(ptr, bytes);
#else
  no_cuda();
#endif
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCPU && src_device == Device::kCPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef DITGEN_WITH_CUDA
  if (src_device == Device::kCPU) return cuda::copy_to_device(dst, src, bytes);
  if (dst_device == Device::kCPU) return cuda::copy_to_host(dst, src, bytes);
  cuda::copy_on_device(dst, src, bytes);
#else
  no_cuda();
#endif
}

void copy(void* dst, Device dst_device, DType dst_dtype, const void* src, Device src_device, DType src_dtype,
          int64_t n) {
  if (n <= 0) return;
  if (dst_device == Device::kCPU && src_device == Device::kCPU)
    return convert_host(src, src_dtype, dst, dst_dtype, n);
#ifdef DITGEN_WITH_CUDA
  // CUDA tensors are floating (Tensor::empty enforces it); a host integer
  // tensor goes through a host float32 copy first.
  if (!is_floating(src_dtype) || !is_floating(dst_dtype)) {
    if (src_device == Device::kCPU) {
      std::vector<float> widened(static_cast<size_t>(n));
      convert_host(src, src_dtype, widened.data(), DType::kF32, n);
      return copy(dst, dst_device, dst_dtype, widened.data(), Device::kCPU, DType::kF32, n);
    }
    std::vector<float> narrowed(static_cast<size_t>(n));
    copy(narrowed.data(), Device::kCPU, DType::kF32, src, src_device, src_dtype, n);
    return convert_host(narrowed.data(), DType::kF32, dst, dst_dtype, n);
  }
  const size_t src_bytes = static_cast<size_t>(n) * dtype_size(src_dtype);
  const size_t dst_bytes = static_cast<size_t>(n) * dtype_size(dst_dtype);
  if (src_dtype == dst_dtype) return copy_bytes(dst, dst_device, src, src_device, src_bytes);
  if (src_device == Device::kCPU) {  // host src_dtype -> device dst_dtype: upload as stored, cast there
    cuda::DeviceBuffer staged(src_bytes);
    cuda::copy_to_device(staged.get(), src, src_bytes);
    cuda::cast(staged.get(), src_dtype, dst, dst_dtype, n);
    cuda::synchronize();  // staged is freed (stream-ordered) on return; keep the host contract blocking
    return;
  }
  if (dst_device == Device::kCPU) {  // device src_dtype -> host dst_dtype: cast there, download
    cuda::DeviceBuffer staged(dst_bytes);
    cuda::cast(src, src_dtype, staged.get(), dst_dtype, n);
    cuda::copy_to_host(dst, staged.get(), dst_bytes);
    return;
  }
  cuda::cast(src, src_dtype, dst, dst_dtype, n);
#else
  no_cuda();
#endif
}

}  // namespace ditgen::device_memory
