#include "ops/backend.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

bool cpu_has_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  // CPUID leaf 7: subleaf 1 EAX bit 5 = AVX512_BF16, subleaf 0 EDX bit 22 =
  // AMX-BF16 (read directly: clang's __builtin_cpu_supports lacks these names).
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool avx512_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
  const bool amx_bf16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) != 0;
  return (avx512_bf16 && __builtin_cpu_supports("avx512f")) || amx_bf16;
#else
  return false;
#endif
}

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
