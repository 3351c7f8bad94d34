// Storage behind Tensor on each device: the one place the tensor layer meets
// the CUDA runtime (kernels/cuda/device.h). In a build without the CUDA
// backend every CUDA request is a RuntimeFailure saying so, and the rest of
// the tensor layer never mentions CUDA.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "vocab/dtype.h"

namespace ditgen::device_memory {

// Whether this build has the CUDA backend (not whether a GPU is present).
bool cuda_built();

// Owned storage of `bytes` on `device`, freed when the last handle goes (to
// the caching allocators: CUDA's, and the host's for 1 MiB and more).
std::shared_ptr<void> allocate(Device device, size_t bytes);
// The host blocks the cache holds (free, kept for reuse) back to the system,
// and their total: between stages, so blocks sized for one stage's tensors
// do not stay resident through the next.
void release_cached_host();
size_t cached_host_bytes();
// Whether this build caches host blocks (not under AddressSanitizer, whose
// use-after-free checks need every block really freed).
bool host_cache_enabled();
void fill_zero(Device device, void* ptr, size_t bytes);

// Copies `bytes` bytes as they are between any two devices (a
// block-quantized weight's blocks). Blocking when the host is involved.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// Copies n elements between any two devices, converting dtype on the way
// (as convert_host on the CPU, by the device's cast kernel on CUDA).
// Blocking when the host is involved.
void copy(void* dst, Device dst_device, DType dst_dtype, const void* src, Device src_device, DType src_dtype,
          int64_t n);

}  // namespace ditgen::device_memory
