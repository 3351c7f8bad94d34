#include "cli/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "cli/pab_setup.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/dit.h"
#include "models/vae.h"
#include "pipeline/dit_pipeline.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"

namespace ditgen::cli {

namespace {

// Creates the directory and a probe file in it (then removes the probe).
void probe_writable_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir.empty() ? "." : dir, ec);
  const std::string probe = (dir.empty() ? std::string(".") : dir) + "/.ditgen-probe-" + std::to_string(getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    throw ConfigError(what + ": cannot write into '" + (dir.empty() ? "." : dir) + "': " + errno_text(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void probe_writable_file(const std::string& path, const std::string& what) {
  probe_writable_dir(std::filesystem::path(path).parent_path().string(), what + " '" + path + "'");
}

}  // namespace

Preflight preflight(const RunConfig& cfg, const CliOptions& opts, bool output_rank) {
  Preflight p;
  const std::string& where = opts.config_path;
  const io::ModelDir dir = io::ModelDir::open(cfg.model.path);
  const auto t = models::DitConfig::from_json(dir.part_config("transformer"), dir.part_config_path("transformer"));
  const auto v = models::VaeConfig::from_json(dir.part_config("vae"), dir.part_config_path("vae"));

  const int64_t size = t.sample_size * v.scale_factor();
  if ((cfg.generate.height && cfg.generate.height != size) || (cfg.generate.width && cfg.generate.width != size))
    throw ConfigError(where + ": generate.height/width: this DiT model generates " + std::to_string(size) + "x" +
                      std::to_string(size) + " only (sample_size " + std::to_string(t.sample_size) +
                      " x VAE factor " + std::to_string(v.scale_factor()) + ")");

  const auto id2label = dir.id2label();
  for (size_t i = 0; i < cfg.generate.class_labels.size(); ++i) {
    const auto& l = cfg.generate.class_labels[i];
    std::variant<int64_t, std::string> label;
    if (const int* id = std::get_if<int>(&l)) label = static_cast<int64_t>(*id);
    else label = std::get<std::string>(l);
    p.labels.push_back(pipeline::resolve_class_label(label, id2label, t.num_classes,
                                                     where + ": generate.class_labels[" + std::to_string(i) + "]"));
  }

  // The step count against the scheduler (e.g. more steps than training timesteps).
  const std::string sched_path = dir.part_config_path("scheduler");
  sched::make_scheduler(cfg.generate.scheduler, sched::load_scheduler_config(sched_path), sched_path)
      ->set_timesteps(cfg.generate.steps);

  if (!opts.init_noise.empty()) {
    const Shape want = {static_cast<int64_t>(p.labels.size()), t.in_channels, t.sample_size, t.sample_size};
    try {
      auto f = io::SafetensorsFile::open(opts.init_noise);
      if (!f->contains("noise")) throw ConfigError("the file has no tensor named 'noise'");
      if (f->info("noise").shape != want)
        throw ConfigError("tensor 'noise' has shape " + shape_str(f->info("noise").shape) + ", expected " +
                          shape_str(want) + " (outputs, C, h, w)");
      // Noise is float32 (the sampler's dtype): a 16-bit file widens exactly;
      // clone() detaches a float32 one from the mapping.
      const Tensor noise = f->load("noise");
      p.init_noise = noise.dtype() == DType::kF32 ? noise.clone() : noise.to(DType::kF32);
    } catch (const Error& e) {  // a bad argument file is a bad argument: exit 2
      const std::string msg = e.what();
      throw ConfigError("--init-noise " + (msg.rfind(opts.init_noise, 0) == 0 ? msg : opts.init_noise + ": " + msg));
    }
  }

  p.pab = pab_schedule(cfg, where, static_cast<int>(t.num_layers));

  if (output_rank) {
    const int outputs = static_cast<int>(p.labels.size());
    for (int i = 0; i < outputs; ++i) probe_writable_file(output_path_for(cfg.output.path, i, outputs), "output.path");
    if (cfg.output.grid) probe_writable_file(grid_path_for(cfg.output.path), "output.grid");
    if (!opts.save_latents.empty()) probe_writable_file(opts.save_latents, "--save-latents");
    if (!opts.pab_stats.empty()) probe_writable_file(opts.pab_stats, "--pab-stats");
    if (!opts.pab_analyze.empty()) probe_writable_dir(opts.pab_analyze, "--pab-analyze");
  }
  return p;
}

}  // namespace ditgen::cli
