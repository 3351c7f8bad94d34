// `ditgen plan`: the model's Workload from its config files (through the
// registry: no weights, no tokenizer, so the published configs of
// configs/models/ plan; a model.path not downloaded yet plans from the
// published folder of its name), the settings the run left unset at the
// model's defaults, the dtype the run would compute in on this machine
// (--device / model.dtype resolved as a run resolves them), then the
// parallel layer's table, the memory per rank and stage (pipeline/
// run_memory.h, the process itself measured as this one's resident bytes
// before anything is read) and a time estimate from this machine's
// measured rates (cli/rate_probe.h; --no-calibrate skips it).
#include "cli/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "config/cli_options.h"
#include "config/config.h"
#include "cli/config_notes.h"
#include "cli/layout_setup.h"
#include "cli/model_presence.h"
#include "cli/rate_probe.h"
#include "cli/run_memory_setup.h"
#include "config/device_choice.h"
#include "ops/backend.h"
#include "parallel/mpi_runtime.h"
#include "parallel/plan.h"
#include "parallel/step_cost.h"
#include "pipeline/component_files.h"
#include "pipeline/pipeline.h"
#include "pipeline/run_memory.h"
#include "util/memory_info.h"
#include "util/strings.h"

namespace ditgen::cli {

namespace {

// The published configs of a model not downloaded yet: configs/models/<the
// last part of model.source, else of model.path>, when that folder is
// there; "" otherwise.
std::string published_fallback(const RunConfig& cfg) {
  std::error_code ec;
  if (std::filesystem::is_directory(cfg.model.path, ec)) return "";
  for (const std::string& name : {cfg.model.source, cfg.model.path}) {
    const std::string base = std::filesystem::path(name).lexically_normal().filename().string();
    if (base.empty() || base == "." || base == "..") continue;
    std::string dir;
    try {
      dir = pipeline::published_configs_dir() + "/" + base;
    } catch (const Error&) {
      return "";
    }
    if (std::filesystem::is_directory(dir + "/transformer", ec)) return dir;
  }
  return "";
}

// "rank 0 (decodes)" / "ranks 1-3" columns of the stage table.
void print_stage_memory(const pipeline::RunMemory& m, const pipeline::VaeTilingDecision& tiling) {
  const bool several = m.world_size > 1;
  const std::string others = m.world_size > 2 ? "ranks 1-" + std::to_string(m.world_size - 1) : "rank 1";
  std::printf("memory per rank by stage (estimate; docs/cli.md#ditgen-plan-memory-and-time says what is counted):\n");
  std::printf("  %-15s %18s%s\n", "stage", several ? "rank 0 (decodes)" : "one process",
              several ? ("  " + std::string(18 - std::min<size_t>(18, others.size()), ' ') + others).c_str() : "");
  auto row = [&](const char* stage, double r0, double rest, bool rest_applies) {
    std::printf("  %-15s %18s", stage, format_bytes(r0).c_str());
    if (several) std::printf("  %18s", rest_applies ? format_bytes(rest).c_str() : "-");
    std::printf("\n");
  };
  row("text encoding", m.output_rank.text_encoding, m.other_ranks.text_encoding, true);
  row("denoising", m.output_rank.denoising, m.other_ranks.denoising, true);
  row("VAE decode", m.output_rank.decode, 0, false);
  std::printf("  %-15s %18s", "peak", format_bytes(m.output_rank.peak()).c_str());
  if (several) std::printf("  %18s", format_bytes(m.other_ranks.peak()).c_str());
  std::printf("\n");
  std::printf("peak memory per rank: rank 0 %s (%s)", format_bytes(m.output_rank.peak()).c_str(),
              m.output_rank.peak_stage());
  if (several)
    std::printf(", %s %s%s (%s)", others.c_str(), format_bytes(m.other_ranks.peak()).c_str(),
                m.world_size > 2 ? " each" : "", m.other_ranks.peak_stage());
  std::printf("; the peak is set by %s\n", m.peak_where().c_str());
  std::printf("counted: the process itself %s (measured: code, libraries, configs, thread pool), transformer weights %s per rank, "
              "activations %s per rank",
              format_bytes(m.process).c_str(), format_bytes(m.transformer_weights).c_str(),
              format_bytes(m.activations).c_str());
  if (m.text_encoder_weights > 0)
    std::printf(", text encoder %s + %s while it runs", format_bytes(m.text_encoder_weights).c_str(),
                format_bytes(m.text_activations).c_str());
  std::printf(", VAE decoder %s + %s working + %s of frames (rank 0)\n", format_bytes(m.vae_weights).c_str(),
              format_bytes(m.decode_work).c_str(), format_bytes(m.decoded_frames).c_str());
  std::printf("VAE decode: %s, %s%s\n", tiling.grid ? "tiled" : "untiled", tiling.why.c_str(),
              several ? "; only rank 0 decodes (it writes the outputs), the other ranks are done by then and "
                        "hold their weights only"
                      : "");
}

}  // namespace

void run_plan(const CliOptions& opts) {
  RunConfig loaded = load_config(opts.config_path, opts.set_overrides, opts.override_origins);
  std::string fallback_note;
  if (const std::string published = published_fallback(loaded); !published.empty()) {
    fallback_note = "model.path " + loaded.model.path + " does not exist yet: planning from the published config " +
                    published + " (config files only; docs/real-models.md says how to download the model)\n";
    loaded.model.path = published;
  }
  require_model_folder(loaded, opts.config_path);
  const auto pipe = pipeline::Pipeline::open(loaded.model.path, pipeline::Pipeline::OpenFor::kPlan,
                                             pipeline::ComponentFiles::of(loaded.model));
  const RunConfig cfg = pipeline::with_model_defaults(loaded, pipe->transformer());
  const models::TransformerSpec& model = pipe->transformer();
  const Shape latent = model.latent_shape(cfg.generate.height, cfg.generate.width, cfg.generate.frames,
                                          pipe->vae().factors(), opts.config_path + ": generate");
  const parallel::Workload work = pipe->workload(cfg.generate, latent);  // the text's rows: the run's
  const DeviceChoice device = choose_device(opts.device, cfg.model.dtype, opts.attention, ops::cuda_built(),
                                            ops::cuda_device_count(), ops::cpu_has_bf16());
  const ElementSizing sizing = element_sizing(cfg, device, *pipe);
  const parallel::ElementSizes bytes = sizing.bytes;
  const std::string& quantized_note = sizing.note;
  const bool cfg_guidance = cfg.generate.guidance_scale > 1.0;
  const int64_t images = std::min<int64_t>(cfg.generate.batch_size, cfg.generate.num_outputs());
  std::vector<parallel::PlanRow> rows;
  std::string title;
  if (opts.world_size > 0) {
    rows = parallel::plan_valid_layouts(opts.world_size, work, images, cfg.generate.guidance_scale, bytes);
    title = "valid layouts for " + std::to_string(opts.world_size) + " ranks, " + cfg.model.path;
  } else {
    const parallel::Layout layout = requested_layout(cfg, work);
    parallel::validate_layout(layout, layout.world_size(), work, cfg.generate.guidance_scale, opts.config_path);
    rows.push_back(parallel::plan_layout(layout, work, images, cfg_guidance, bytes));
    title = "layout of " + opts.config_path + ", " + cfg.model.path;
  }
  if (parallel::MpiRuntime::world().rank() != 0) return;  // one table, not one per rank
  print_config_notes(loaded);
  std::printf("%s", fallback_note.c_str());
  print_notes(pipe->notes());
  std::printf("%s", quantized_note.c_str());
  const char* unit = work.video() ? "video" : "image";
  std::string what = std::to_string(images) + " " + unit + (images == 1 ? "" : "s");
  if (work.video())
    what += " of " + std::to_string(work.frames) + " frames x " + std::to_string(work.tokens) + " tokens";
  std::printf("%s", parallel::format_plan_table(rows, title + " (batch of " + what + (cfg_guidance ? ", CFG" : "") +
                                                          ", " + dtype_name(device.dtype) + " on " +
                                                          device_name(device.device) + ")")
                        .c_str());
  // mpirun starts as many ranks as there are cores unless told
  // --oversubscribe: say so before the user meets Open MPI's page of "not
  // enough slots".
  const int ranks = opts.world_size > 0 ? opts.world_size : rows.front().layout.world_size();
  if (const int cores = available_cores(); ranks > cores)
    std::printf("%s %d ranks and this machine has %d core%s: mpirun starts at most one rank per core "
                "unless given --oversubscribe (mpirun --oversubscribe -np %d ...), and ranks sharing cores run each "
                "step slower; or spread the ranks over several machines (docs/parallel.md)\n",
                opts.world_size > 0 ? "these layouts need" : "this layout needs", ranks, cores, cores == 1 ? "" : "s",
                ranks);
  if (rows.size() == 1) {
    // What one computation of each kind of branch sends: a PAB reuse skips exactly this.
    const parallel::PlanRow& r = rows.front();
    std::printf("per block, bytes one branch sends (a PAB reuse skips them): spatial attention %s",
                format_bytes(r.branch_spatial).c_str());
    if (work.has(parallel::AttentionKind::kTemporal))
      std::printf(", temporal attention %s", format_bytes(r.branch_temporal).c_str());
    if (work.has(parallel::AttentionKind::kCross))
      std::printf(", cross-attention %s", format_bytes(r.branch_cross).c_str());
    std::printf(", MLP %s\n", format_bytes(r.branch_mlp).c_str());
    if (r.layout.pp > 1) {
      std::string layers;  // "4+2": each stage's share (sp_weights may make them uneven)
      const parallel::Sharding stages = r.layout.stage_split();
      for (int st = 0; st < r.layout.pp; ++st) {
        if (st) layers += '+';
        layers += std::to_string(stages.size(work.layers, r.layout.pp, st));
      }
      std::printf("PipeFusion: %d stages of %s layers, %d patches, %d warm-up step(s); the kept keys and values take "
                  "%s on rank 0 (in activations/rank); the last stage sends %s per step (the output to every "
                  "stage), the others their patches' rows (pp hops); bubble %.0f%% of each step after the warm-up\n",
                  r.layout.pp, layers.c_str(), r.layout.pipeline_patches(), r.layout.warmup_steps,
                  format_bytes(r.stale_kv_bytes).c_str(), format_bytes(r.comm_pp_last).c_str(),
                  100 * r.pipeline_bubble);
    }
  }

  // The process itself, as a run holds it before its weights load: its
  // code and libraries, the configs read, the thread pool and GEMM
  // kernels started (warm_up_compute; a CPU run's).
  const int threads = opts.threads > 0 ? opts.threads : default_threads(ranks);
  if (device.device == Device::kCPU) warm_up_compute(work.hidden(), device.dtype, threads);
  const double process_bytes = resident_bytes();

  // Memory per rank and stage, with the VAE tiling a run would choose
  // against the limit (--memory-limit, else this machine's available
  // memory shared among the ranks).
  const double limit = memory_limit_bytes(opts, process_bytes, ranks);
  auto memory_of = [&](const parallel::PlanRow& row) {
    return pipeline::plan_run(*pipe, run_memory_inputs(cfg, *pipe, device, row, latent, process_bytes), cfg.vae,
                              limit, false, opts.config_path);
  };
  if (rows.size() > 1) {
    std::printf("peak memory per rank (estimate; plan one layout for each stage's):");
    for (const parallel::PlanRow& r : rows)
      std::printf("%s %s %s", &r == &rows.front() ? "" : ",", r.layout.str().c_str(),
                  format_bytes(memory_of(r).memory.peak()).c_str());
    std::printf("\n");
    return;
  }
  const parallel::PlanRow& r = rows.front();
  const pipeline::RunMemoryPlan memory = memory_of(r);
  print_stage_memory(memory.memory, memory.tiling);
  if (opts.memory_limit_gib > 0 && memory.memory.peak() > limit)
    std::printf("--memory-limit %g is below this run's peak of %s: a run with it stops before loading (exit 2)\n",
                opts.memory_limit_gib, format_bytes(memory.memory.peak()).c_str());

  // Time: the step's FLOPs and bytes at this machine's measured rates.
  if (opts.no_calibrate) return;
  if (device.device != Device::kCPU) {
    std::printf("time: no estimate for %s (the rates measured are the CPU's)\n", device_name(device.device));
    return;
  }
  const MachineRates rates = measure_rates(static_cast<int64_t>(r.rows_per_rank), work.hidden(), work.mlp_hidden, device.dtype, threads);
  const parallel::StepCost cost = parallel::step_cost(r, work);
  const double step = cost.flops / rates.flops_per_second + cost.bytes / rates.bytes_per_second;
  const int64_t outputs = cfg.generate.num_outputs();
  const int64_t batches = (outputs + images - 1) / images;
  const double run = step * static_cast<double>(cfg.generate.steps * batches);
  std::printf("time (estimate): %s per step (%.3g GFLOP, %s moved per rank), %s for %d steps x %lld "
              "batch%s of denoising (text encoding and the VAE decode not included); from this machine's rates, "
              "measured in %.1f s with %d thread%s per rank: GEMM %.3g GFLOP/s (%s), memory %.3g GB/s "
              "(--no-calibrate skips this)\n",
              step < 0.1 ? (std::to_string(static_cast<int>(step * 1000 + 0.5)) + " ms").c_str()
                         : format_duration(step).c_str(),
              cost.flops / 1e9, format_bytes(cost.bytes).c_str(), format_duration(run).c_str(), cfg.generate.steps,
              static_cast<long long>(batches), batches == 1 ? "" : "es", rates.seconds, rates.threads,
              rates.threads == 1 ? "" : "s", rates.flops_per_second / 1e9, dtype_name(device.dtype),
              rates.bytes_per_second / 1e9);
}

}  // namespace ditgen::cli
