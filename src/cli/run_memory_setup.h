// The run's memory plan wired from its config, device and layout
// (pipeline/run_memory.h), shared by `plan` (which prints it) and a run
// (which decides its VAE tiling by it and checks --memory-limit against
// it): the bytes per element the layout's figures take, the inputs, and
// the memory limit.
#pragma once
#include <string>

#include "config/cli_options.h"
#include "config/config.h"
#include "config/device_choice.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "pipeline/run_memory.h"

namespace ditgen::cli {

// The bytes per element of the layout's figures on this device, and for
// quantized layers (a GGUF transformer, model.quantize int8) their
// matrices' bytes from the file's tensor table, said in `note` ("" for
// float weights).
struct ElementSizing {
  parallel::ElementSizes bytes;
  std::string note;
};
ElementSizing element_sizing(const RunConfig& cfg, const DeviceChoice& device, const pipeline::Pipeline& pipe);

// What the memory plan takes of this run: `row` its layout's plan row,
// `process_bytes` the process's resident bytes before anything loaded.
pipeline::RunMemoryInputs run_memory_inputs(const RunConfig& cfg, const pipeline::Pipeline& pipe,
                                            const DeviceChoice& device, const parallel::PlanRow& row,
                                            const Shape& latent, double process_bytes);

// The limit a rank plans against: --memory-limit, else its share of the
// memory available now (util/memory_info.h; cgroup limits honoured) among
// the ranks on this node, plus what it holds already (`process_bytes`).
double memory_limit_bytes(const CliOptions& opts, double process_bytes, int ranks_on_node);

}  // namespace ditgen::cli
