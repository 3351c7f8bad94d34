// Everything about a generate run that can be checked without reading a
// weight, in two parts: the request (the pipeline's own checks of the
// generate section against the model's config files, --init-noise, the PAB
// schedule against the model's attention kinds and blocks) and the output
// writers (every file they will write is probed for writability). Runs
// before the (slow) weight load, so a mistake costs milliseconds rather than
// a whole run; all failures are exit 2 naming the file and field.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/cli_options.h"
#include "config/config.h"
#include "io/output_writer.h"
#include "config/device_choice.h"
#include "parallel/layout.h"
#include "pipeline/pipeline.h"
#include "pipeline/run_memory.h"

namespace ditgen::cli {

// Image-to-video runs given no height and / or width: the size the images
// give at the model's default area (pipeline/input_images.h), the model's
// default frame size being its latent_shape with no size given.
RunConfig with_image_frame_size(RunConfig cfg, const pipeline::RunImages& images, const pipeline::Pipeline& pipe,
                                const pipeline::VideoKind& video, const std::string& where);

// The pipeline's request for this config, with --init-noise and PAB added.
pipeline::Request prepare_request(const RunConfig& cfg, const CliOptions& opts, const pipeline::Pipeline& pipe);

// The run's memory plan for this layout (pipeline/run_memory.h, `plan`'s
// figures): the VAE tiling it decides against the memory limit
// (--memory-limit, else the memory available now) handed to the
// pipeline's decode, the tile sizes checked against its VAE, and on the
// CPU a --memory-limit under the run's peak refused (ConfigError naming the
// field and the smallest limit that works; the plan's figures are host
// memory, and a CUDA run keeps its weights and activations on the device). `process_bytes`: the process's
// resident bytes before anything loaded. The decision's note (for stderr)
// and record (for the outputs' metadata) come back in it.
pipeline::RunMemoryPlan setup_run_memory(const RunConfig& cfg, const CliOptions& opts, pipeline::Pipeline& pipe,
                                         const pipeline::Request& req, const parallel::Layout& layout,
                                         const DeviceChoice& device, double process_bytes);

// The writers of output.format / output.grid for `outputs` outputs of
// `frames` frames; `config_json` (the effective config) goes into every
// file's metadata; `names`: per output, a file stem replacing the numbered
// one (a prompt file's JSONL "name"; empty: all numbered); `run_json`:
// what ran (device, dtypes, threads, layout), the contact sheet's
// "ditgen_run" (the outputs carry it in their OutputItem).
std::vector<std::unique_ptr<io::OutputWriter>> make_output_writers(const OutputConfig& out, int outputs, int frames,
                                                                   const std::string& config_json,
                                                                   const std::vector<std::string>& names = {},
                                                                   const std::string& run_json = "");

// Probes every path the writers, the manifest and the optional files
// (--save-latents, --pab-stats, --pab-analyze) will write: ConfigError for
// a target that exists and is not a regular file (a device, FIFO, socket
// or folder) or lies in a system folder (/dev, /proc, /sys), before any
// folder is created; then each folder is created (util/created_folders.h)
// and written into once.
void probe_outputs(const std::vector<std::unique_ptr<io::OutputWriter>>& writers, const std::string& manifest,
                   const CliOptions& opts);

// The same for one file: ConfigError naming `what` (the option) unless
// `path` can be written (see probe_outputs).
void probe_writable_file(const std::string& path, const std::string& what);

}  // namespace ditgen::cli
