#include "ops/backend.h"

#include <cstdio>
#include <stdexcept>

#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"

#ifdef DITGEN_WITH_CUDA
#include "kernels/cuda/device.h"
#include "ops/gpu/gpu_ops.h"
#endif

namespace ditgen::ops {

bool cuda_built() { return device_memory::cuda_built(); }

int cuda_device_count() {
#ifdef DITGEN_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

AttentionMode attention_mode_from_name(const std::string& name) {
  if (name == "auto") return AttentionMode::kAuto;
  if (name == "flash") return AttentionMode::kFlash;
  if (name == "math") return AttentionMode::kMath;
  throw std::invalid_argument("attention mode: expected auto, flash or math, got '" + name + "'");
}

void bind_cuda_device(int index) {
#ifdef DITGEN_WITH_CUDA
  cuda::set_device(index);
#else
  throw RuntimeFailure("CUDA device " + std::to_string(index) + " requested from a build without the CUDA backend");
#endif
}

size_t cuda_peak_bytes() {
#ifdef DITGEN_WITH_CUDA
  return cuda::allocator_stats().peak_in_use;
#else
  return 0;
#endif
}

void cuda_synchronize() {
#ifdef DITGEN_WITH_CUDA
  cuda::synchronize();
#endif
}

std::string cuda_device_description() {
#ifdef DITGEN_WITH_CUDA
  const cuda::DeviceInfo& d = cuda::current_device_info();
  char buf[256];
  std::snprintf(buf, sizeof buf, "cuda:%d %s (compute capability %d.%d, %.1f GiB)", d.index, d.name.c_str(), d.major,
                d.minor, static_cast<double>(d.total_memory) / (1 << 30));
  return buf;
#else
  return "no CUDA backend";
#endif
}

std::string cuda_attention_path(int64_t head_dim, DType dtype) {
#ifdef DITGEN_WITH_CUDA
  return gpu::attention_path_name(head_dim, dtype, attention_mode());
#else
  (void)head_dim;
  (void)dtype;
  return "none";
#endif
}

}  // namespace ditgen::ops
