// The generate job, in the order of DESIGN.md §3: everything that can be
// checked without weights (arguments, config, unsupported features, output
// paths) is checked first so a bad run fails in milliseconds; then the model
// is loaded and validated, labels resolved, the denoising loop run, and each
// output written atomically with webui-style PNG metadata.
#include "cli/generate_command.h"

#include <chrono>
#include <cmath>
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
#include "io/contact_sheet.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "pipeline/dit_pipeline.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/progress.h"

namespace ditgen::cli {

namespace {

// Resolves --device / model.dtype / --attention, binds this rank's GPU (one
// per rank: the node-local rank, DESIGN.md §4) and sets the attention mode.
DeviceChoice setup_device(const CliOptions& opts, const RunConfig& cfg) {
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
      ops::cuda_attention_path(model_dims(cfg.model.path).head_dim, choice.dtype);
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

// webui "parameters": the class (or prompt) on the first line, then settings.
std::string png_parameters(const std::string& label, const RunConfig& cfg, const std::string& sampler,
                           uint64_t seed, int width, int height) {
  std::string model = std::filesystem::path(cfg.model.path).lexically_normal().filename().string();
  if (model.empty()) model = std::filesystem::path(cfg.model.path).lexically_normal().parent_path().filename();
  return label + "\nSteps: " + std::to_string(cfg.generate.steps) + ", Sampler: " + sampler +
         ", CFG scale: " + format_number(cfg.generate.guidance_scale) + ", Seed: " + std::to_string(seed) +
         ", Size: " + std::to_string(width) + "x" + std::to_string(height) + ", Model: " + model;
}

// Columns of the contact sheet: up to 4 outputs in one row; else a divisor
// of n near sqrt(n), so every row is full (30 outputs: 6 rows of 5, one
// colour of the shapes model per row); when n has none that is not too thin
// (a prime), 0 = ceil(sqrt(n)) columns.
int grid_columns(int n) {
  if (n <= 4) return n;
  const double root = std::sqrt(static_cast<double>(n));
  int best = 0;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0 && (best == 0 || std::abs(d - root) < std::abs(best - root))) best = d;
  return best >= root / 2 && best <= 2 * root ? best : 0;
}

}  // namespace

void run_generate(const CliOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  RunConfig cfg = load_config(opts.config_path, opts.set_overrides);
  reject_unsupported(cfg, opts.config_path);
  const DeviceChoice device = setup_device(opts, cfg);
  if (cfg.generate.class_labels.empty())
    throw ConfigError(opts.config_path + ": generate.class_labels: a DiT model needs class labels");

  // The layout is checked against the model's config.json and the world
  // size before any weight is read; then this rank's groups are formed.
  const RankLayout layout = setup_layout(cfg, opts.config_path, device.device);
  const bool rank0 = layout.world_rank == 0;
  const bool quiet = opts.quiet || !rank0;

  const int threads = opts.threads > 0 ? opts.threads : default_threads(parallel::MpiRuntime::local_size());
  ops::set_num_threads(threads);
  if (std::string(ops::blas_threading()) != "openmp" && !quiet)
    std::fprintf(stderr, "ditgen: warning: OpenBLAS uses %s threading, not OpenMP; expect contention "
                         "(install libopenblas0-openmp)\n", ops::blas_threading());

  // Everything checkable without weights, before loading them.
  const Preflight checked = preflight(cfg, opts, rank0);

  const models::Placement place{device.device, device.dtype};
  const auto pipe = pipeline::DitPipeline::load(cfg.model.path, layout.run, place);
  if (device.device == Device::kCUDA && !quiet) {
    const auto& t = pipe.transformer().config();
    std::fprintf(stderr, "ditgen: %s, %s, attention %s (head size %lld)%s\n", ops::cuda_device_description().c_str(),
                 dtype_name(device.dtype), ops::cuda_attention_path(t.head_dim, device.dtype).c_str(),
                 static_cast<long long>(t.head_dim), layout.nccl ? ", NCCL" : "");
  }
  inject_test_failure(layout.world_rank);

  pipeline::DitRequest req;
  req.labels = checked.labels;
  req.seed = cfg.generate.seed;
  req.steps = cfg.generate.steps;
  req.guidance_scale = static_cast<float>(cfg.generate.guidance_scale);
  req.scheduler = cfg.generate.scheduler;
  req.batch_size = cfg.generate.batch_size;
  req.init_noise = checked.init_noise;
  req.pab = checked.pab;
  pab::ChangeRecorder analysis;
  if (!opts.pab_analyze.empty()) req.pab_analysis = &analysis;

  const int outputs = static_cast<int>(req.labels.size());
  const int batches = (outputs + req.batch_size - 1) / req.batch_size;
  Progress progress(req.steps * batches, !quiet, "denoise");
  auto on_step = [&](int step, int steps, int batch, int) { progress.step_done(batch * steps + step); };
  pipeline::DitResult result = pipe.generate(req, on_step);
  progress.finish();
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

  const nlohmann::json effective = to_json(cfg);
  std::vector<std::string> written;
  std::vector<io::Tile> tiles;  // output.grid: the contact sheet's cells
  for (int i = 0; i < outputs; ++i) {
    const Tensor img = result.images.slice0(i, i + 1).reshape(
        {result.images.dim(1), result.images.dim(2), result.images.dim(3)});
    const int h = static_cast<int>(img.dim(1)), w = static_cast<int>(img.dim(2));
    const auto rgb = io::float_image_to_rgb8(img);
    const std::string path = output_path_for(cfg.output.path, i, outputs);
    io::write_png(path, rgb.data(), w, h, 3,
                  {{"parameters", png_parameters(pipe.label_name(req.labels[i]), cfg, result.scheduler,
                                                 req.seed + static_cast<uint64_t>(i), w, h)},
                   {"ditgen_config", effective.dump()}});
    written.push_back(path);
    if (cfg.output.grid) tiles.push_back({io::RgbImage{w, h, rgb}, pipe.label_name(req.labels[i])});
  }
  if (cfg.output.grid) {
    io::ContactSheetOptions sheet;
    sheet.columns = grid_columns(outputs);
    const std::string grid = grid_path_for(cfg.output.path);
    io::write_png(grid, io::make_contact_sheet(tiles, sheet), {{"ditgen_config", effective.dump()}});
    written.push_back(grid);
  }

  if (!quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "ditgen: wrote %d image%s (%s%s) in %.1f s\n", outputs, outputs == 1 ? "" : "s",
                 written.front().c_str(), outputs > 1 ? ", ..." : "", secs);
  }
  if (profile::enabled()) std::fprintf(stderr, "ditgen: time per op\n%s", profile::report().c_str());
}

}  // namespace ditgen::cli
