// The generate job, wiring only, in the order of docs/design.md §3: the config,
// the pipeline its model's family selects (config files only), everything
// that can be checked without weights (a prompt file's every line, request,
// layout, output paths, the outputs still to make) so a bad run fails in
// milliseconds; then the weights once, and the batch loop (cli/batch_run.h:
// condition -> denoise -> decode -> outputs landing with their manifest
// lines). Names no model family: the registry and the pipelines do.
#include "cli/generate_command.h"

#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/batch_run.h"
#include "cli/batch_work.h"
#include "cli/config_notes.h"
#include "cli/layout_setup.h"
#include "cli/model_presence.h"
#include "cli/pab_setup.h"
#include "cli/preflight.h"
#include "cli/rate_probe.h"
#include "util/atomic_file.h"
#include "config/config.h"
#include "config/device_choice.h"
#include "parallel/device_index.h"
#include "parallel/mpi_runtime.h"
#include "io/output_paths.h"
#include "io/output_writer.h"
#include "io/safetensors.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "pipeline/run_checks.h"
#include "util/error.h"
#include "util/interrupt_report.h"
#include "util/memory_info.h"
#include "util/profile.h"
#include "util/progress.h"

namespace ditgen::cli {

namespace {

// Resolves --device / model.dtype / model.vae_dtype / --attention, binds this rank's GPU (one
// per rank: the node-local rank, docs/design.md §4) and sets the attention mode.
DeviceChoice setup_device(const CliOptions& opts, const RunConfig& cfg, const models::TransformerSpec& model) {
  DeviceChoice choice = choose_device(opts.device, cfg.model.dtype, opts.attention, ops::cuda_built(),
                                      ops::cuda_device_count(), ops::cpu_has_bf16());
  choice.vae_dtype = choose_vae_dtype(cfg.model.vae_dtype, choice.device);
  if (cfg.model.quantize == Quantize::kInt8 && choice.device == Device::kCUDA)
    not_supported("model.quantize \"int8\" on CUDA (" + opts.config_path +
                  "): int8 compute is the CPU's W8A8 GEMM; on a GPU use a GGUF or float file");
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

// What ran, for every file's metadata (issue 36): the webui-style tail of
// the parameters line and a JSON object (PNG text "ditgen_run", MP4 tag
// "synopsis").
struct RunRecord {
  std::string parameters;  // ", Device: cpu, Dtype: bfloat16, ..."
  std::string json;
};

RunRecord run_record(const DeviceChoice& device, int threads, const RankLayout& layout,
                     const std::vector<pipeline::LoraRecord>& loras, const std::string& vae_tiling_json) {
  RunRecord r;
  nlohmann::json j = {{"device", device_name(device.device)},
                      {"dtype", dtype_name(device.dtype)},
                      {"vae_dtype", dtype_name(device.vae_dtype)},
                      {"threads", threads},
                      {"world_size", layout.layout.world_size()},
                      {"layout", layout.layout.str()},
                      {"vae_tiling", nlohmann::json::parse(vae_tiling_json)}};
  r.parameters = std::string(", Device: ") + device_name(device.device) + ", Dtype: " + dtype_name(device.dtype) +
                 ", VAE dtype: " + dtype_name(device.vae_dtype) + ", Threads: " + std::to_string(threads);
  if (layout.layout.world_size() > 1) r.parameters += ", Layout: " + layout.layout.str();
  if (device.device == Device::kCUDA) {
    j["attention"] = device.attention;
    r.parameters += ", Attention: " + device.attention;
  }
  // Each LoRA: its file, the file's SHA-256 (what `sha256sum` prints), its
  // strength and the transformer it changed.
  for (const pipeline::LoraRecord& l : loras) {
    j["lora"].push_back({{"file", l.path}, {"sha256", l.sha256}, {"scale", l.scale}, {"target", l.target}});
    r.parameters += ", Lora: " + std::filesystem::path(l.path).filename().string() + " (" +
                    nlohmann::json(l.scale).dump() + ", " + l.target + ", sha256 " + l.sha256.substr(0, 12) + ")";
  }
  r.json = j.dump();
  return r;
}

// Every rank's peak resident memory, said by rank 0 beside what the memory
// plan estimated for it on the CPU (pipeline/run_memory.h; host memory,
// which a CUDA run's weights and activations are not): "rank 0 268.4 MiB
// (estimated 270.1 MiB)". Collective over the world.
void report_peak_memory(const RankLayout& layout, const pipeline::RunMemory& plan, bool estimated, bool say) {
  const int ranks = parallel::MpiRuntime::world().size();
  const float mine = static_cast<float>(peak_resident_bytes() / (1024.0 * 1024.0));
  std::vector<float> peaks(static_cast<size_t>(ranks), mine);
  if (ranks > 1) parallel::MpiRuntime::world().all_gather(&mine, 1, peaks.data());
  if (!say || layout.world_rank != 0) return;
  std::string line = "ditgen: peak memory (resident)";
  for (int r = 0; r < ranks; ++r) {
    char text[96];
    std::snprintf(text, sizeof text, "%s rank %d %.1f MiB", r ? "," : ":", r,
                  static_cast<double>(peaks[static_cast<size_t>(r)]));
    line += text;
    if (estimated) {
      std::snprintf(text, sizeof text, " (estimated %.1f MiB)",
                    (r == 0 ? plan.output_rank : plan.other_ranks).peak() / (1024.0 * 1024.0));
      line += text;
    }
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

void run_generate(const CliOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  const RunConfig loaded = load_config(opts.config_path, opts.set_overrides, opts.override_origins);
  require_model_folder(loaded, opts.config_path);
  // What the model does with input images, from its config files; the
  // images (the config's, or for a model that takes them its prompt
  // file's lines', the file read here and again below) are checked against
  // the model and read now, before the pipeline opens.
  const pipeline::VideoKind video = pipeline::read_video_kind(loaded.model.path);
  std::optional<pipeline::RunImages> images;
  if (loaded.generate.prompt_file.empty()) {
    images = pipeline::read_run_images(loaded, {}, loaded.generate.num_outputs(), video, opts.config_path);
  } else if (video.takes_image()) {
    const std::vector<config::PromptEntry> lines = config::read_prompt_file(loaded.generate.prompt_file);
    images = pipeline::read_run_images(loaded, lines, static_cast<int64_t>(lines.size()), video, opts.config_path);
  }
  pipeline::refuse_until_models_join(video, loaded.model.path);
  // The model's config files only: its family (registry) picks the pipeline,
  // and the settings the run left unset take the model's defaults.
  const std::unique_ptr<pipeline::Pipeline> pipe = pipeline::Pipeline::open(
      loaded.model.path, pipeline::Pipeline::OpenFor::kRun, pipeline::ComponentFiles::of(loaded.model));
  const RunConfig given = pipeline::with_model_defaults(loaded, pipe->transformer());
  // A prompt file is read and every line checked now, before anything else.
  const std::vector<config::PromptEntry> entries = read_batch_prompts(given, opts.config_path, *pipe);
  if (!images)
    images = pipeline::read_run_images(given, entries, static_cast<int64_t>(entries.size()), video, opts.config_path);
  const RunConfig cfg =
      with_image_frame_size(with_prompt_file_prompts(given, entries), *images, *pipe, video, opts.config_path);
  const models::TransformerSpec& model = pipe->transformer();
  const DeviceChoice device = setup_device(opts, cfg, model);

  // Everything checkable without weights, before loading them: the request
  // against the model, then the layout against its workload and the world
  // size (this rank's groups are formed), then the output paths.
  pipeline::Request req = prepare_request(cfg, opts, *pipe);
  apply_prompt_entries(req, entries, given);
  req.images = images->outputs;
  req.text_cache_dir = opts.text_cache;
  const RankLayout layout = setup_layout(cfg, opts.config_path, pipe->workload(cfg.generate, req.latent_shape), device.device);
  pab::ChangeRecorder analysis;  // --pab-analyze
  if (!opts.pab_analyze.empty()) req.pab_analysis = &analysis;
  pipeline::check_run(req, *pipe, layout.layout, opts.config_path);
  const int threads = opts.threads > 0 ? opts.threads : default_threads(parallel::MpiRuntime::local_size());
  // The process itself, before its weights load, as `plan` measures it
  // (cli/rate_probe.h): with its thread pool and GEMM kernels started.
  if (device.device == Device::kCPU) warm_up_compute(pipe->workload(cfg.generate, req.latent_shape).hidden(), device.dtype, threads);
  const double process_bytes = resident_bytes();
  const pipeline::RunMemoryPlan memory =
      setup_run_memory(cfg, opts, *pipe, req, layout.layout, device, process_bytes);
  const std::string& tiling_note = memory.tiling.note;
  const bool rank0 = layout.world_rank == 0;
  const bool quiet = opts.quiet || !rank0;
  if (!quiet) {
    print_config_notes(loaded);
    print_notes(pipe->notes());
    if (!tiling_note.empty()) std::fprintf(stderr, "ditgen: %s\n", tiling_note.c_str());
  }

  // The LoRA files read and checked against the transformers (exit 2 on a
  // key that matches nothing, unless lora_strict is false), before weights.
  const pipeline::LoraSetup lora = pipe->use_lora(cfg.lora, {cfg.lora_strict, cfg.lora_apply}, opts.config_path);
  if (!quiet)
    for (const std::string& line : lora.lines) std::fprintf(stderr, "ditgen: %s\n", line.c_str());

  ops::set_num_threads(threads);
  if (std::string(ops::blas_threading()) != "openmp" && !quiet)
    std::fprintf(stderr, "ditgen: warning: OpenBLAS uses %s threading, not OpenMP; expect contention "
                         "(install libopenblas0-openmp)\n", ops::blas_threading());

  const int outputs = static_cast<int>(req.outputs());
  // Frames per output: a video's latents are (C, F, h, w), an image's (C, h, w).
  const int frames = req.latent_shape.size() == 4 ? static_cast<int>(req.latent_shape[1]) : 1;
  // The files' metadata: the config as given (a prompt file, not its
  // prompts), without the run control skip_existing, so a resumed batch
  // writes the very files an uninterrupted one does.
  RunConfig metadata_cfg = given;
  metadata_cfg.output.skip_existing = false;
  const nlohmann::json effective = to_json(metadata_cfg);
  // Beside what was asked (model.dtype "auto", no --threads), what ran.
  const RunRecord ran = run_record(device, threads, layout, lora.records, memory.tiling.record_json(cfg.vae.tiling));
  std::vector<std::unique_ptr<io::OutputWriter>> writers;
  if (rank0) {  // the output rank writes
    writers = make_output_writers(cfg.output, outputs, frames, effective.dump(), output_names(entries), ran.json);
    probe_outputs(writers, io::manifest_path_for(cfg.output.path), opts);
  }
  const BatchWork work = plan_batch_work(given, req, writers, rank0);
  // One process only: under mpirun a signal reaches the ranks as the job is
  // torn down (also when another rank failed), and that rank's error must
  // stay the last line the user reads.
  if (rank0 && parallel::MpiRuntime::world().size() == 1)
    arm_interrupt_report(io::manifest_path_for(cfg.output.path), static_cast<int64_t>(work.pending.size()));

  models::Placement place(device.device, device.dtype);
  place.int8 = cfg.model.quantize == Quantize::kInt8;
  pipe->load_weights(layout.run, place, device.vae_dtype);
  if (device.device == Device::kCUDA && !quiet)
    std::fprintf(stderr, "ditgen: %s, %s, attention %s (head size %lld)%s\n", ops::cuda_device_description().c_str(),
                 dtype_name(device.dtype), ops::cuda_attention_path(model.head_dim(), device.dtype).c_str(),
                 static_cast<long long>(model.head_dim()), layout.nccl ? ", NCCL" : "");
  inject_test_failure(layout.world_rank);

  BatchInputs in;
  in.cfg = &given;
  in.opts = &opts;
  in.pipe = pipe.get();
  in.req = &req;
  in.work = &work;
  in.writers = &writers;
  in.config_json = effective.dump();
  in.ran_parameters = ran.parameters;
  in.ran_json = ran.json;
  for (const config::PromptEntry& e : entries) in.lines.push_back(e.line);
  in.output_rank = rank0;
  in.quiet = quiet;
  in.world_rank = layout.world_rank;
  const BatchOutcome result = run_batch(in, !opts.save_latents.empty());
  write_test_comm_stats(layout, result.forwards);
  report_peak_memory(layout, memory.memory, device.device == Device::kCPU, !quiet);
  if (!rank0) return;  // the output rank decodes and writes
  if (!opts.pab_analyze.empty()) write_pab_analysis(opts.pab_analyze, analysis);
  if (req.pab.enabled()) {
    if (!quiet) std::fprintf(stderr, "ditgen: %s\n", pab_summary_line(result.pab).c_str());
    if (!opts.pab_stats.empty()) {
      const std::string json = pab_summary_json(result.pab, req.pab).dump(2) + "\n";
      write_file_atomic(opts.pab_stats, json.data(), json.size());
    }
  }
  if (req.step_cache) {
    if (!quiet) std::fprintf(stderr, "ditgen: %s\n", cache_summary_line(result.pab.step_cache, *req.step_cache).c_str());
    if (!opts.cache_stats.empty()) {
      const std::string json = cache_summary_json(result.pab.step_cache, *req.step_cache).dump(2) + "\n";
      write_file_atomic(opts.cache_stats, json.data(), json.size());
    }
  }
  if (!opts.save_latents.empty()) io::write_safetensors(opts.save_latents, {{"latents", result.latents}});

  if (!quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const char* what = cfg.output.format == OutputFormat::kMp4 || frames > 1 ? "video" : "image";
    if (result.made == 0)
      std::fprintf(stderr, "ditgen: nothing to make: all %d outputs exist (%.1f s)\n", outputs, secs);
    else
      std::fprintf(stderr, "ditgen: made %d %s%s in %.1f s\n", result.made, what, result.made == 1 ? "" : "s", secs);
  }
  if (profile::enabled()) std::fprintf(stderr, "ditgen: time per op\n%s", profile::report().c_str());
}

}  // namespace ditgen::cli
