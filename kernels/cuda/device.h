// The CUDA runtime as ditgen uses it: one device per process (the launcher's
// local rank, docs/design.md §4), one compute stream, one cuBLAS handle bound to
// it, and a caching allocator so the denoising loop never calls cudaMalloc.
// Every kernel in kernels/cuda/ runs on stream(); host code that reads a
// result calls synchronize() (or copies with the blocking helpers below).
// Host-only header: included by .cpp and .cu files alike.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace ditgen::cuda {

// Devices visible to this process; 0 (never an error) when there is no
// driver or no device, so CPU-only machines can ask.
int device_count();

struct DeviceInfo {
  int index = 0;
  int major = 0, minor = 0;       // compute capability
  std::string name;
  size_t total_memory = 0;        // bytes
  int multiprocessors = 0;
  size_t shared_memory_per_block_optin = 0;  // bytes, for large-tile kernels
};
DeviceInfo device_info(int index);

// Binds this process (thread) to a device; call before any other call here.
// Creates the stream and the cuBLAS handle on first use.
void set_device(int index);
int current_device();
const DeviceInfo& current_device_info();

cudaStream_t stream();      // the compute stream (non-blocking)
cublasHandle_t cublas();    // bound to stream(), with a workspace from the allocator
void synchronize();         // waits for stream(); turns async faults into RuntimeFailure

// float32 means float32 (docs/design.md §3): cuBLAS runs in CUBLAS_DEFAULT_MATH
// unless TF32 tensor-core math is allowed here (CUBLAS_TF32_TENSOR_OP_MATH).
// Kernels and cuBLASLt calls that pick a compute type read tf32_allowed().
void set_allow_tf32(bool allow);
bool tf32_allowed();

// The backend's environment switches (docs/cuda.md): whether `name` is set
// to 0, off or OFF (DITGEN_CUBLASLT, DITGEN_CUDNN_ATTENTION), or to 1
// (DITGEN_CUDA_GRAPHS). Read on each call: callers keep the answer.
bool env_switched_off(const char* name);
bool env_switched_on(const char* name);

// Caching allocator (stream-ordered on stream()): freed blocks go back to a
// per-size-class free list and are reused; memory returns to the driver only
// through release_cached() or at exit. 256-byte aligned.
void* device_alloc(size_t bytes);
void device_free(void* ptr);
void release_cached();
struct AllocatorStats {
  size_t in_use = 0, cached = 0, peak_in_use = 0;  // bytes
  size_t driver_allocs = 0;                        // cudaMalloc calls so far
};
AllocatorStats allocator_stats();

// Owning device buffer (RAII over device_alloc/device_free), for scratch
// space such as im2col columns or attention scores.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : ptr_(bytes ? device_alloc(bytes) : nullptr), bytes_(bytes) {}
  ~DeviceBuffer() { if (ptr_) device_free(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { if (ptr_) device_free(ptr_); ptr_ = o.ptr_; bytes_ = o.bytes_; o.ptr_ = nullptr; o.bytes_ = 0; }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Blocking copies on stream() (they synchronise it).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
// Stream-ordered device work (no synchronisation): zero bytes, copy bytes
// between device buffers, and copy `rows` rows of `row_bytes` between two
// strided device layouts (pitches in bytes).
void fill_zero(void* dst, size_t bytes);
void copy_on_device(void* dst, const void* src, size_t bytes);
void copy_2d_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                       size_t rows);

}  // namespace ditgen::cuda
