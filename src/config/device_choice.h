// Where a run computes: --device, model.dtype and --attention resolved
// against what this build and this machine have (DESIGN.md §1, §3). A pure
// function of its inputs, so every combination is tested on the CPU.
//   --device auto: CUDA when the build has it and a device is visible, else CPU.
//   model.dtype auto: float32 on CPU, bfloat16 on CUDA; float32 is true
//   float32 on both (no TF32); bfloat16 / float16 exist on CUDA only.
//   --attention flash | math chooses between the CUDA kernels; on the CPU
//   (one tiled implementation) asking for either is an error, not ignored.
#pragma once
#include <string>

#include "tensor/dtype.h"

namespace ditgen {

struct DeviceChoice {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;
  std::string attention = "auto";  // auto | flash | math (CUDA only)
};

// ConfigError / not supported (exit 2) for what no machine could run
// (--device cuda in a CPU-only build, half precision or a forced attention
// kernel on the CPU); RuntimeFailure (exit 4) for --device cuda on a machine
// without a visible device. `config_path` names the file in messages.
DeviceChoice choose_device(const std::string& device_option, const std::string& model_dtype,
                           const std::string& attention_option, bool cuda_built, int cuda_devices,
                           const std::string& config_path);

}  // namespace ditgen
