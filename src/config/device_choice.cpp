#include "config/device_choice.h"

#include <cstdlib>

#include "util/error.h"

namespace ditgen {

DeviceChoice choose_device(const std::string& device_option, const std::string& model_dtype,
                           const std::string& attention_option, bool cuda_built, int cuda_devices, bool cpu_bf16,
                           const std::string& config_path) {
  DeviceChoice c;
  if (device_option == "cuda") {
    if (!cuda_built)
      throw ConfigError("--device cuda: this ditgen was built without the CUDA backend (configure with "
                        "-DDITGEN_CUDA=ON on a machine with the CUDA toolkit); use --device cpu or auto");
    if (cuda_devices <= 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw RuntimeFailure(std::string("--device cuda: no CUDA device is visible to this process") +
                           (visible ? " (CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\")" : "") +
                           "; use --device cpu or auto");
    }
    c.device = Device::kCUDA;
  } else if (device_option == "auto") {
    c.device = cuda_built && cuda_devices > 0 ? Device::kCUDA : Device::kCPU;
  } else if (device_option != "cpu") {
    throw ConfigError("--device: expected auto, cpu or cuda, got '" + device_option + "'");
  }

  const bool cuda = c.device == Device::kCUDA;
  if (model_dtype == "auto") {
    c.dtype = cuda || cpu_bf16 ? DType::kBF16 : DType::kF32;
  } else if (model_dtype == "float32") {
    c.dtype = DType::kF32;
  } else if (model_dtype == "bfloat16") {
    c.dtype = DType::kBF16;
  } else if (model_dtype == "float16") {
    c.dtype = cuda ? DType::kF16 : DType::kF32;  // no float16 arithmetic on CPUs
  } else {
    throw ConfigError(config_path + ": model.dtype: expected auto, float32, bfloat16 or float16, got '" +
                      model_dtype + "'");
  }

  if (attention_option != "auto" && attention_option != "flash" && attention_option != "math")
    throw ConfigError("--attention: expected auto, flash or math, got '" + attention_option + "'");
  if (!cuda && attention_option != "auto")
    not_supported("--attention " + attention_option + " on CPU — it chooses between the CUDA attention kernels; "
                  "the CPU has one tiled implementation (use --attention auto, or --device cuda)");
  c.attention = attention_option;
  return c;
}

DType choose_vae_dtype(const std::string& vae_dtype, Device device, const std::string& config_path) {
  if (vae_dtype == "float32") return DType::kF32;
  if (vae_dtype == "bfloat16") return DType::kBF16;
  if (vae_dtype == "float16") return device == Device::kCUDA ? DType::kF16 : DType::kF32;
  throw ConfigError(config_path + ": model.vae_dtype: expected float32, bfloat16 or float16, got '" + vae_dtype + "'");
}

}  // namespace ditgen
