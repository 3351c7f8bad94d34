// See run_memory_setup.h.
#include "cli/run_memory_setup.h"

#include <algorithm>
#include <cstdio>

#include "models/placed_bytes.h"
#include "util/memory_info.h"

namespace ditgen::cli {

ElementSizing element_sizing(const RunConfig& cfg, const DeviceChoice& device, const pipeline::Pipeline& pipe) {
  // On the CPU only the GEMM weights take the compute dtype; activations
  // and messages are float32 (models/placement.h).
  ElementSizing s;
  s.bytes = parallel::ElementSizes(
      static_cast<int>(dtype_size(device.dtype)),
      static_cast<int>(dtype_size(device.device == Device::kCPU ? DType::kF32 : device.dtype)));
  if (!cfg.model.transformer.empty() || cfg.model.quantize == Quantize::kInt8) {
    models::Placement place(device.device, device.dtype);
    place.int8 = cfg.model.quantize == Quantize::kInt8;
    s.bytes.layer_matrices = models::block_matrix_bytes_per_element(pipe.transformer_weights(), place);
    char line[160];
    std::snprintf(line, sizeof line, "the blocks' matrices take %.3g bytes per weight (%s)\n", s.bytes.layer_matrices,
                  place.int8 ? "model.quantize int8" : cfg.model.transformer.c_str());
    s.note = line;
  }
  return s;
}

pipeline::RunMemoryInputs run_memory_inputs(const RunConfig& cfg, const pipeline::Pipeline& pipe,
                                            const DeviceChoice& device, const parallel::PlanRow& row,
                                            const Shape& latent, double process_bytes) {
  pipeline::RunMemoryInputs in;
  in.process_bytes = process_bytes;
  in.row = row;
  in.compute = device.dtype;
  in.vae = pipeline::vae_placement(device.device, choose_vae_dtype(cfg.model.vae_dtype, device.device), pipe.vae())
               .dtype;
  in.latent = latent;
  const int64_t outputs = cfg.generate.num_outputs();
  in.batch_outputs = std::min<int64_t>(std::max(1, cfg.generate.batch_size), outputs);
  // Every prompt of the run in one pass of the encoder, with CFG's negative.
  in.texts = outputs + (cfg.generate.guidance_scale > 1.0 ? 1 : 0);
  in.text_tokens = pipe.text_tokens(cfg.generate);
  return in;
}

double memory_limit_bytes(const CliOptions& opts, double process_bytes, int ranks_on_node) {
  if (opts.memory_limit_gib > 0) return opts.memory_limit_gib * 1024.0 * 1024.0 * 1024.0;
  return available_memory_bytes() / std::max(1, ranks_on_node) + process_bytes;
}

}  // namespace ditgen::cli
