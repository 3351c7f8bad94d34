// The compute backends this build and this machine have, for the run's
// setup (src/cli): whether CUDA is built in, how many devices are visible,
// binding this process to one, and what it is. Without the CUDA backend
// every answer is "none" and binding is an error; nothing here needs a GPU
// to be asked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/ops.h"
#include "vocab/dtype.h"

namespace ditgen::ops {

bool cuda_built();
// Whether this CPU has bfloat16 dot products (AVX512-BF16 with AVX-512, or
// AMX-BF16): model.dtype auto is bfloat16 there.
bool cpu_has_bf16();
// Visible CUDA devices; 0 in a CPU-only build or without driver or device.
int cuda_device_count();
// "auto" / "flash" / "math" (--attention) as an AttentionMode;
// std::invalid_argument for anything else.
AttentionMode attention_mode_from_name(const std::string& name);
// Binds this process to CUDA device `index` (one per rank, docs/design.md §4):
// every later CUDA tensor and op lives there.
void bind_cuda_device(int index);
// Peak bytes in use in the caching allocator of the bound device so far (0
// without CUDA).
size_t cuda_peak_bytes();
// Waits for every op queued on the bound device (a no-op without CUDA).
void cuda_synchronize();
// "cuda:0 NVIDIA H100 80GB HBM3 (compute capability 9.0, 79.1 GiB)" for the
// bound device.
std::string cuda_device_description();
// The CUDA attention path ("flash" / "math") the bound device takes for
// this head size and dtype under the current attention_mode().
std::string cuda_attention_path(int64_t head_dim, DType dtype);

}  // namespace ditgen::ops
