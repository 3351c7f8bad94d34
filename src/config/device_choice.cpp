#include "config/device_choice.h"

#include <cstdlib>

#include "util/error.h"

namespace ditgen {

DeviceChoice choose_device(const std::string& device_option, DTypeChoice model_dtype,
                           const std::string& attention_option, bool cuda_built, int cuda_devices, bool cpu_bf16) {
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
  c.dtype = resolve_dtype(model_dtype, c.device, cpu_bf16);

  if (attention_option != "auto" && attention_option != "flash" && attention_option != "math")
    throw ConfigError("--attention: expected auto, flash or math, got '" + attention_option + "'");
  if (!cuda && attention_option != "auto")
    not_supported("--attention " + attention_option + " on CPU — it chooses between the CUDA attention kernels; "
                  "the CPU has one tiled implementation (use --attention auto, or --device cuda)");
  c.attention = attention_option;
  return c;
}

DType choose_vae_dtype(DTypeChoice vae_dtype, Device device) {
  return resolve_dtype(vae_dtype, device, /*cpu_bf16=*/false);  // no auto here: the CPU's bf16 does not matter
}

}  // namespace ditgen
