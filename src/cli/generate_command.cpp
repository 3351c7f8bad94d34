// The generate job, wiring only, in the order of DESIGN.md §3: the config,
// the pipeline its model's family selects (config files only), everything
// that can be checked without weights (request, layout, output paths) so a
// bad run fails in milliseconds; then the weights, the pipeline's
// condition -> denoise -> decode, and the output writers. Names no model
// family: the registry and the pipelines do.
#include "cli/generate_command.h"

#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cli/layout_setup.h"
#include "cli/pab_setup.h"
#include "cli/preflight.h"
#include "util/atomic_file.h"
#include "config/config.h"
#include "config/device_choice.h"
#include "parallel/device_index.h"
#include "parallel/mpi_runtime.h"
#include "io/output_writer.h"
#include "io/safetensors.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/progress.h"

namespace ditgen::cli {

namespace {

// Resolves --device / model.dtype / --attention, binds this rank's GPU (one
// per rank: the node-local rank, DESIGN.md §4) and sets the attention mode.
DeviceChoice setup_device(const CliOptions& opts, const RunConfig& cfg, const models::TransformerSpec& model) {
  const DeviceChoice choice = choose_device(opts.device, cfg.model.dtype, opts.attention, ops::cuda_built(),
                                            ops::cuda_device_count(), opts.config_path);
  if (choice.device == Device::kCUDA) {
    try {
      ops::bind_cuda_device(
          parallel::local_device_index(std::getenv, parallel::MpiRuntime::local_rank(), ops::cuda_device_count()));
    } catch (const RuntimeFailure& e) {
      throw RuntimeFailure(std::string(e.what()) + "; or run on the CPU with --device cpu");
    }
    ops::set_attention_mode(ops::attention_mode_from_name(choice.attention));
    // A forced path the transformer's head size cannot take fails now, from
    // config.json alone, not after the weights are uploaded.
    try {
      ops::cuda_attention_path(model.head_dim(), choice.dtype);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("--attention " + choice.attention + ": " + e.what());
    }
    if (profile::enabled()) profile::set_sync(&ops::cuda_synchronize);
  }
  return choice;
}

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// webui "parameters": the class (or prompt) on the first line, then
// settings; a video's frame count after its size.
std::string png_parameters(const std::string& label, const RunConfig& cfg, const std::string& sampler,
                           uint64_t seed, int width, int height, int frames) {
  std::string model = std::filesystem::path(cfg.model.path).lexically_normal().filename().string();
  if (model.empty()) model = std::filesystem::path(cfg.model.path).lexically_normal().parent_path().filename();
  // webui puts the negative prompt on its own line after the prompt.
  const std::string negative =
      cfg.generate.negative_prompt.empty() ? "" : "\nNegative prompt: " + cfg.generate.negative_prompt;
  return label + negative + "\nSteps: " + std::to_string(cfg.generate.steps) + ", Sampler: " + sampler +
         ", CFG scale: " + format_number(cfg.generate.guidance_scale) + ", Seed: " + std::to_string(seed) +
         ", Size: " + std::to_string(width) + "x" + std::to_string(height) +
         (frames > 1 ? ", Frames: " + std::to_string(frames) : std::string()) + ", Model: " + model;
}

}  // namespace

void run_generate(const CliOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  RunConfig cfg = load_config(opts.config_path, opts.set_overrides);
  reject_unsupported(cfg, opts.config_path);
  // The model's config files only: its family (registry) picks the pipeline.
  const std::unique_ptr<pipeline::Pipeline> pipe = pipeline::Pipeline::open(cfg.model.path);
  const models::TransformerSpec& model = pipe->transformer();
  const DeviceChoice device = setup_device(opts, cfg, model);

  // Everything checkable without weights, before loading them: the request
  // against the model, then the layout against its workload and the world
  // size (this rank's groups are formed), then the output paths.
  pipeline::Request req = prepare_request(cfg, opts, *pipe);
  const RankLayout layout = setup_layout(cfg, opts.config_path, model.workload(req.latent_shape), device.device);
  const bool rank0 = layout.world_rank == 0;
  const bool quiet = opts.quiet || !rank0;

  const int threads = opts.threads > 0 ? opts.threads : default_threads(parallel::MpiRuntime::local_size());
  ops::set_num_threads(threads);
  if (std::string(ops::blas_threading()) != "openmp" && !quiet)
    std::fprintf(stderr, "ditgen: warning: OpenBLAS uses %s threading, not OpenMP; expect contention "
                         "(install libopenblas0-openmp)\n", ops::blas_threading());

  const int outputs = static_cast<int>(req.outputs());
  // Frames per output: a video's latents are (C, F, h, w), an image's (C, h, w).
  const int frames = req.latent_shape.size() == 4 ? static_cast<int>(req.latent_shape[1]) : 1;
  const nlohmann::json effective = to_json(cfg);
  std::vector<std::unique_ptr<io::OutputWriter>> writers;
  if (rank0) {  // the output rank writes
    writers = make_output_writers(cfg.output, outputs, frames, effective.dump());
    probe_outputs(writers, opts);
  }

  pipe->load_weights(layout.run, {device.device, device.dtype});
  if (device.device == Device::kCUDA && !quiet)
    std::fprintf(stderr, "ditgen: %s, %s, attention %s (head size %lld)%s\n", ops::cuda_device_description().c_str(),
                 dtype_name(device.dtype), ops::cuda_attention_path(model.head_dim(), device.dtype).c_str(),
                 static_cast<long long>(model.head_dim()), layout.nccl ? ", NCCL" : "");
  inject_test_failure(layout.world_rank);

  pab::ChangeRecorder analysis;
  if (!opts.pab_analyze.empty()) req.pab_analysis = &analysis;
  const int batches = (outputs + req.batch_size - 1) / req.batch_size;
  // One progress report per stage: the text encoder (text models), the
  // denoising steps of every batch, the decode of each output. Each starts
  // its clock when its stage starts.
  std::optional<Progress> stage_progress;
  auto on_stage = [&](const std::string& stage, int done, int total) {
    if (done == 0) {
      stage_progress.reset();  // ends the previous stage's line
      stage_progress.emplace(stage == "denoise" ? req.steps * batches : total, !quiet, stage);
    } else if (stage_progress) {
      stage_progress->step_done(done - 1);
    }
  };
  auto on_step = [&](int step, int steps, int batch, int) {
    inject_test_kill(layout.world_rank, static_cast<int64_t>(batch) * steps + step + 1);
    if (stage_progress) stage_progress->step_done(batch * steps + step);
  };
  const pipeline::Result result = pipe->generate(req, on_step, on_stage);
  stage_progress.reset();
  write_test_comm_stats(layout, static_cast<int64_t>(req.steps) * batches);
  if (!rank0) return;  // the output rank decodes and writes
  if (!opts.pab_analyze.empty()) write_pab_analysis(opts.pab_analyze, analysis);
  if (req.pab.enabled()) {
    if (!quiet) std::fprintf(stderr, "ditgen: %s\n", pab_summary_line(result.pab).c_str());
    if (!opts.pab_stats.empty()) {
      const std::string json = pab_summary_json(result.pab, req.pab).dump(2) + "\n";
      write_file_atomic(opts.pab_stats, json.data(), json.size());
    }
  }

  if (!opts.save_latents.empty()) io::write_safetensors(opts.save_latents, {{"latents", result.latents}});

  std::vector<std::string> written;
  for (int i = 0; i < outputs; ++i) {
    io::OutputItem item;
    item.index = i;
    item.frames = result.frames.slice0(i, i + 1).reshape(
        {result.frames.dim(1), result.frames.dim(2), result.frames.dim(3), result.frames.dim(4)});
    item.caption = req.captions[i];
    const int h = static_cast<int>(item.frames.dim(2)), w = static_cast<int>(item.frames.dim(3));
    item.text = {{"parameters", png_parameters(item.caption, cfg, result.scheduler, req.seed + static_cast<uint64_t>(i),
                                               w, h, frames)},
                 {"ditgen_config", effective.dump()}};
    for (auto& writer : writers)
      for (auto& path : writer->write(item)) written.push_back(std::move(path));
  }
  for (auto& writer : writers)
    for (auto& path : writer->finish()) written.push_back(std::move(path));

  if (!quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const char* what = cfg.output.format == "mp4" || frames > 1 ? "video" : "image";
    std::fprintf(stderr, "ditgen: wrote %d %s%s (%s%s) in %.1f s\n", outputs, what, outputs == 1 ? "" : "s",
                 written.front().c_str(), written.size() > 1 ? ", ..." : "", secs);
  }
  if (profile::enabled()) std::fprintf(stderr, "ditgen: time per op\n%s", profile::report().c_str());
}

}  // namespace ditgen::cli
