// `ditgen plan`: the model's Workload from its config files (through the
// registry: no weights, no tokenizer, so the published configs of
// configs/models/ plan), the settings the run left unset at the model's
// defaults, the dtype the run would compute in on this machine
// (--device / model.dtype resolved as a run resolves them), then the
// parallel layer's table.
#include "cli/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "config/cli_options.h"
#include "config/config.h"
#include "cli/config_notes.h"
#include "cli/layout_setup.h"
#include "cli/model_presence.h"
#include "config/device_choice.h"
#include "models/placed_bytes.h"
#include "ops/backend.h"
#include "parallel/mpi_runtime.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "util/strings.h"

namespace ditgen::cli {

void run_plan(const CliOptions& opts) {
  const RunConfig loaded = load_config(opts.config_path, opts.set_overrides, opts.override_origins);
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
  // On the CPU only the GEMM weights take the compute dtype; activations
  // and messages are float32 (models/placement.h).
  parallel::ElementSizes bytes(static_cast<int>(dtype_size(device.dtype)),
                                     static_cast<int>(dtype_size(device.device == Device::kCPU ? DType::kF32
                                                                                               : device.dtype)));
  // Quantized layers (a GGUF transformer, model.quantize int8): their
  // matrices' bytes from the file's tensor table.
  std::string quantized_note;
  if (!cfg.model.transformer.empty() || cfg.model.quantize == Quantize::kInt8) {
    models::Placement place(device.device, device.dtype);
    place.int8 = cfg.model.quantize == Quantize::kInt8;
    bytes.layer_matrices = models::block_matrix_bytes_per_element(pipe->transformer_weights(), place);
    char line[160];
    std::snprintf(line, sizeof line, "the blocks' matrices take %.3g bytes per weight (%s)\n", bytes.layer_matrices,
                  place.int8 ? "model.quantize int8" : cfg.model.transformer.c_str());
    quantized_note = line;
  }
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
}

}  // namespace ditgen::cli
