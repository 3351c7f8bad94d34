// Where a run computes: --device, model.dtype and --attention resolved
// against what this build and this machine have (docs/design.md §1, §3). A pure
// function of its inputs, so every combination is tested on the CPU.
//   --device auto: CUDA when the build has it and a device is visible, else CPU.
//   model.dtype auto: bfloat16 on CUDA and on CPUs with AVX512-BF16 or
//   AMX, float32 on other CPUs; float32 is true float32 on both (no TF32).
//   On the CPU, bfloat16 is the GEMMs' and attention's arithmetic (float32
//   sums; activations, norms and the scheduler float32; emulated, at float32
//   speed, where the CPU has no bf16 instructions) and float16 computes as
//   float32 (CPUs have no float16 arithmetic; float16 weights stay float16
//   in memory and are widened exactly inside the GEMM).
//   --attention flash | math chooses between the CUDA kernels; on the CPU
//   (one tiled implementation) asking for either is an error, not ignored.
#pragma once
#include <string>

#include "vocab/dtype.h"
#include "vocab/dtype_choice.h"

namespace ditgen {

struct DeviceChoice {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;      // the transformer's and the text encoder's compute dtype
  DType vae_dtype = DType::kF32;  // the VAE decoder's (choose_vae_dtype, where the run has a VAE)
  std::string attention = "auto";  // auto | flash | math (CUDA only)
};

// The VAE decoder's compute dtype from model.vae_dtype (float32 unless it
// says otherwise, docs/design.md §2): float32, bfloat16 (its convolutions' and
// GEMMs' arithmetic on the CPU, as model.dtype's), float16 (CUDA; float32 on
// the CPU): resolve_dtype's rule (vocab/dtype_choice.h).
DType choose_vae_dtype(DTypeChoice vae_dtype, Device device);

// ConfigError / not supported (exit 2) for what no machine could run
// (--device cuda in a CPU-only build, a forced attention kernel on the CPU); RuntimeFailure (exit 4) for --device cuda on a machine
// without a visible device. model.dtype was checked when the config was read.
// cpu_bf16: whether this CPU has bfloat16 dot products (ops::cpu_has_bf16).
DeviceChoice choose_device(const std::string& device_option, DTypeChoice model_dtype,
                           const std::string& attention_option, bool cuda_built, int cuda_devices, bool cpu_bf16);

}  // namespace ditgen
