// Device storage for Tensor: aligned host memory, and with the CUDA backend
// the caching allocator of kernels/cuda/device.h plus its copy and cast
// primitives. The only file of the tensor layer with a DITGEN_WITH_CUDA branch.
// Host-side conversion is convert_host (tensor/convert.h); a host <-> device
// copy moves the bytes in the host tensor's dtype and casts on the device.
#include "tensor/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "tensor/convert.h"
#include "util/error.h"

#ifdef DITGEN_WITH_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#endif

namespace ditgen::device_memory {

namespace {

std::shared_ptr<void> allocate_host(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
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
  if (src_device == Device::kCPU) {  // host src_dtype -> device dst_dtype: upload as stored, cast there
    if (dst_dtype == src_dtype) return cuda::copy_to_device(dst, src, src_bytes);
    cuda::DeviceBuffer staged(src_bytes);
    cuda::copy_to_device(staged.get(), src, src_bytes);
    cuda::cast(staged.get(), src_dtype, dst, dst_dtype, n);
    cuda::synchronize();  // staged is freed (stream-ordered) on return; keep the host contract blocking
    return;
  }
  if (dst_device == Device::kCPU) {  // device src_dtype -> host dst_dtype: cast there, download
    if (src_dtype == dst_dtype) return cuda::copy_to_host(dst, src, src_bytes);
    cuda::DeviceBuffer staged(dst_bytes);
    cuda::cast(src, src_dtype, staged.get(), dst_dtype, n);
    cuda::copy_to_host(dst, staged.get(), dst_bytes);
    return;
  }
  if (src_dtype == dst_dtype) return cuda::copy_on_device(dst, src, src_bytes);
  cuda::cast(src, src_dtype, dst, dst_dtype, n);
#else
  no_cuda();
#endif
}

}  // namespace ditgen::device_memory
