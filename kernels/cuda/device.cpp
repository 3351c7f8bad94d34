// The process-wide CUDA runtime of device.h: the bound device, its compute
// stream, the cuBLAS handle and the caching allocator (BlockCache over
// cudaMalloc/cudaFree).
//
// Design: one Runtime object, created on first use and never destroyed. At
// exit the CUDA runtime may be torn down before static destructors run, so
// freeing there could fail; the driver reclaims everything with the process.
// Binding is lazy: a call that needs a device before set_device() binds the
// current CUDA device (0 unless the caller chose another), as CUDA itself
// does. The allocator is guarded by a mutex (buffers may be freed from other
// threads); stream() and cublas() read fields that never change once bound.
#include "kernels/cuda/device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "util/block_cache.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace ditgen::cuda {

namespace {

// cuBLAS's recommended workspace: 32 MiB on Hopper and newer, 4 MiB before.
size_t cublas_workspace_bytes(const DeviceInfo& info) {
  return info.major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

// Never reduced-precision split-K reductions: bf16/f16 GEMMs accumulate in
// float32 all the way, as the CPU path does.
cublasMath_t math_mode(bool allow_tf32) {
  return static_cast<cublasMath_t>((allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

struct Runtime;
Runtime& runtime();

// nullptr when the device is out of memory (BlockCache then releases its
// cached blocks and retries); any other failure throws.
void* raw_device_alloc(size_t bytes);
void raw_device_free(void* ptr);

struct Runtime {
  std::mutex mutex;                // guards everything below but `bound`
  std::atomic<bool> bound{false};  // set once, after the fields are ready
  int device = -1;
  DeviceInfo info;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  bool allow_tf32 = false;
  BlockCache cache{raw_device_alloc, raw_device_free, "CUDA device"};
};

Runtime& runtime() {
  static Runtime* const instance = new Runtime;  // never destroyed (see top)
  return *instance;
}

void* raw_device_alloc(size_t bytes) {
  Runtime& r = runtime();
  // The calling thread's current device may differ from the bound one.
  DITGEN_CUDA_CHECK(cudaSetDevice(r.device));
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: out of memory is recoverable here
    // The cache is about to cudaFree its cached blocks; kernels queued on
    // the stream may still use them until it drains.
    DITGEN_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    return nullptr;
  }
  if (err != cudaSuccess) {
    throw_error("CUDA", "cudaMalloc", cudaGetErrorString(err), __FILE__, __LINE__);
  }
  return ptr;
}

void raw_device_free(void* ptr) { DITGEN_CUDA_CHECK(cudaFree(ptr)); }

void bind(Runtime& r, int index) {
  const int count = device_count();
  if (index < 0 || index >= count) {
    throw RuntimeFailure("CUDA device " + std::to_string(index) + " requested, but " +
                         (count == 0 ? std::string("no CUDA device is visible")
                                     : std::to_string(count) + " are visible"));
  }
  DITGEN_CUDA_CHECK(cudaSetDevice(index));
  r.device = index;
  r.info = device_info(index);
  // A failure below ends the run (exit 4), so partial setup is not undone.
  DITGEN_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  DITGEN_CUBLAS_CHECK(cublasCreate(&r.cublas));
  DITGEN_CUBLAS_CHECK(cublasSetStream(r.cublas, r.stream));
  DITGEN_CUBLAS_CHECK(cublasSetMathMode(r.cublas, math_mode(r.allow_tf32)));
  // Without a workspace of its own, cuBLAS would allocate one behind the
  // allocator's back.
  const size_t workspace_bytes = cublas_workspace_bytes(r.info);
  void* workspace = r.cache.allocate(workspace_bytes);
  DITGEN_CUBLAS_CHECK(cublasSetWorkspace(r.cublas, workspace, workspace_bytes));
  r.bound.store(true, std::memory_order_release);
}

Runtime& bound_runtime() {
  Runtime& r = runtime();
  if (!r.bound.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.bound.load(std::memory_order_relaxed)) {
      int current = 0;
      if (device_count() > 0) DITGEN_CUDA_CHECK(cudaGetDevice(&current));
      bind(r, current);
    }
  }
  return r;
}

}  // namespace

int device_count() {
  // The visible devices do not change during a run; ask the driver once.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: not an error here
      return 0;
    }
    return n;
  }();
  return count;
}

DeviceInfo device_info(int index) {
  const int count = device_count();
  if (index < 0 || index >= count) {
    throw RuntimeFailure("device_info: CUDA device " + std::to_string(index) +
                         " does not exist (" + std::to_string(count) + " visible)");
  }
  cudaDeviceProp prop{};
  DITGEN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.major = prop.major;
  info.minor = prop.minor;
  info.name = prop.name;
  info.total_memory = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  return info;
}

void set_device(int index) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.bound.load(std::memory_order_relaxed)) {
    if (r.device == index) return;
    // The stream, the handle and every cached block belong to the old device.
    throw std::logic_error("cuda::set_device(" + std::to_string(index) +
                           "): this process is bound to CUDA device " + std::to_string(r.device) +
                           " already (one device per process)");
  }
  bind(r, index);
}

int current_device() { return bound_runtime().device; }
const DeviceInfo& current_device_info() { return bound_runtime().info; }
cudaStream_t stream() { return bound_runtime().stream; }
cublasHandle_t cublas() { return bound_runtime().cublas; }

bool env_switched_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "OFF") == 0);
}

bool env_switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

void set_allow_tf32(bool allow) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.allow_tf32 = allow;
  if (r.bound.load(std::memory_order_relaxed)) {
    DITGEN_CUBLAS_CHECK(cublasSetMathMode(r.cublas, math_mode(allow)));
  }
}

bool tf32_allowed() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.allow_tf32;
}

void synchronize() { DITGEN_CUDA_CHECK(cudaStreamSynchronize(stream())); }

void* device_alloc(size_t bytes) {
  Runtime& r = bound_runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.cache.allocate(bytes);
}

void device_free(void* ptr) {
  if (ptr == nullptr) return;
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.cache.deallocate(ptr);
}

void release_cached() {
  Runtime& r = runtime();
  if (!r.bound.load(std::memory_order_acquire)) return;  // nothing allocated yet
  // Kernels still queued may use cached blocks; cudaFree must come after.
  DITGEN_CUDA_CHECK(cudaStreamSynchronize(r.stream));
  std::lock_guard<std::mutex> lock(r.mutex);
  r.cache.release_cached();
}

AllocatorStats allocator_stats() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  const BlockCacheStats& s = r.cache.stats();
  AllocatorStats stats;
  stats.in_use = s.in_use;
  stats.cached = s.cached;
  stats.peak_in_use = s.peak_in_use;
  stats.driver_allocs = s.driver_allocs;
  return stats;
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DITGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  synchronize();
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DITGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  synchronize();
}

void fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  DITGEN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream()));
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  DITGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void copy_2d_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                       size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  DITGEN_CUDA_CHECK(
      cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice, stream()));
}

}  // namespace ditgen::cuda
