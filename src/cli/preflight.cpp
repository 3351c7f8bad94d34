#include "cli/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "cli/pab_setup.h"
#include "io/mp4_writer.h"
#include "io/safetensors.h"
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

pipeline::Request prepare_request(const RunConfig& cfg, const CliOptions& opts, const pipeline::Pipeline& pipe) {
  const std::string& where = opts.config_path;
  pipeline::Request req = pipe.prepare(cfg.generate, where);
  req.text_encoder_dtype = cfg.model.dtype;
  if (!opts.init_noise.empty()) {
    const Shape& one = req.latent_shape;
    Shape want = {req.outputs()};
    want.insert(want.end(), one.begin(), one.end());
    try {
      auto f = io::SafetensorsFile::open(opts.init_noise);
      if (!f->contains("noise")) throw ConfigError("the file has no tensor named 'noise'");
      if (f->info("noise").shape != want)
        throw ConfigError("tensor 'noise' has shape " + shape_str(f->info("noise").shape) + ", expected " +
                          shape_str(want) + (one.size() == 4 ? " (outputs, C, F, h, w)" : " (outputs, C, h, w)"));
      // Noise is float32 (the sampler's dtype): a 16-bit file widens exactly;
      // clone() detaches a float32 one from the mapping.
      const Tensor noise = f->load("noise");
      req.init_noise = noise.dtype() == DType::kF32 ? noise.clone() : noise.to(DType::kF32);
    } catch (const Error& e) {  // a bad argument file is a bad argument: exit 2
      const std::string msg = e.what();
      throw ConfigError("--init-noise " + (msg.rfind(opts.init_noise, 0) == 0 ? msg : opts.init_noise + ": " + msg));
    }
  }
  req.pab = pab_schedule(cfg, where, pipe.transformer());
  return req;
}

std::vector<std::unique_ptr<io::OutputWriter>> make_output_writers(const OutputConfig& out, int outputs, int frames,
                                                                   const std::string& config_json,
                                                                   const std::vector<std::string>& names) {
  const io::OutputPlan plan{out.path, outputs, frames, names};
  std::vector<std::unique_ptr<io::OutputWriter>> w;
  if (out.format == "mp4")  // one video per output (an image: a one-frame video)
    w.push_back(io::make_mp4_writer(plan, out.fps, out.crf));
  else  // "png": one file per image, or per frame of a video
    w.push_back(frames == 1 ? io::make_png_writer(plan) : io::make_png_frames_writer(plan));
  if (out.grid) w.push_back(io::make_contact_sheet_writer(plan, {{"ditgen_config", config_json}}));
  return w;
}

void probe_outputs(const std::vector<std::unique_ptr<io::OutputWriter>>& writers, const CliOptions& opts) {
  for (const auto& w : writers)
    for (const std::string& path : w->planned_paths()) probe_writable_file(path, "output.path");
  if (!opts.save_latents.empty()) probe_writable_file(opts.save_latents, "--save-latents");
  if (!opts.pab_stats.empty()) probe_writable_file(opts.pab_stats, "--pab-stats");
  if (!opts.pab_analyze.empty()) probe_writable_dir(opts.pab_analyze, "--pab-analyze");
}

}  // namespace ditgen::cli
