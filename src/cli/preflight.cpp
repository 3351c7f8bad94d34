#include "cli/preflight.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "cli/pab_setup.h"
#include "cli/run_memory_setup.h"
#include "io/mp4_writer.h"
#include "io/output_paths.h"
#include "io/safetensors.h"
#include "parallel/mpi_runtime.h"
#include "util/created_folders.h"
#include "util/error.h"

namespace ditgen::cli {

namespace {

// What a path that exists is, when it is not a regular file.
const char* not_a_file_kind(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return nullptr;
}

// The kernel's own folders (/dev, /proc, /sys and what is mounted like
// them) hold devices and live state, never outputs: `--output /dev/full`
// must not write eight files into /dev (issue 36).
bool is_system_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(fs::absolute(folder.empty() ? "." : folder, ec), ec);
  for (const char* root : {"/dev", "/proc", "/sys"}) {
    const std::string r = root;
    const std::string p = real.string();
    if (p == r || p.rfind(r + "/", 0) == 0) return true;
  }
  struct statfs fs_info;
  if (::statfs(real.c_str(), &fs_info) != 0) return false;
  constexpr long kProc = 0x9fa0, kSysfs = 0x62656572, kDevpts = 0x1cd1;  // linux/magic.h
  return fs_info.f_type == kProc || fs_info.f_type == kSysfs || fs_info.f_type == kDevpts;
}

// Refuses a target that exists and is not a regular file (a device, FIFO,
// socket or folder: renaming a file onto it would replace it or fail, and
// writing into it is never what a user meant), or that lies in a system
// folder. `what`: the option or field, for the message.
void refuse_unusable_target(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0)
    if (const char* kind = not_a_file_kind(st))
      throw ConfigError(what + ": '" + path + "' exists and is " + kind +
                        ", not a regular file; name a file to write (nothing was written)");
  const std::string folder = std::filesystem::path(path).parent_path().string();
  if (is_system_folder(folder))
    throw ConfigError(what + ": '" + path + "' is in " + (folder.empty() ? "." : folder) +
                      ", a system folder of devices; name a file in an ordinary folder (nothing was written)");
}

// Creates the directory and a probe file in it (then removes the probe).
void probe_writable_dir(const std::string& dir, const std::string& what) {
  const std::string folder = dir.empty() ? "." : dir;
  std::string error;
  if (!create_folders(folder, error)) throw ConfigError(what + ": cannot create the folder " + error);
  const std::string probe = folder + "/.ditgen-probe-" + std::to_string(getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw ConfigError(what + ": cannot write into '" + folder + "': " + errno_text(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void probe_writable_file(const std::string& path, const std::string& what) {
  refuse_unusable_target(path, what);
  probe_writable_dir(std::filesystem::path(path).parent_path().string(), what + " '" + path + "'");
}

RunConfig with_image_frame_size(RunConfig cfg, const pipeline::RunImages& images, const pipeline::Pipeline& pipe,
                                const pipeline::VideoKind& video, const std::string& where) {
  const bool height = given_key(cfg, "generate", "height"), width = given_key(cfg, "generate", "width");
  if (!images.any() || (height && width)) return cfg;
  const int64_t spatial = pipe.vae().factors().spatial;
  const Shape latent = pipe.transformer().latent_shape(0, 0, cfg.generate.frames, pipe.vae().factors(),
                                                       where + ": generate");
  const int64_t area = latent[latent.size() - 2] * spatial * latent.back() * spatial;
  const std::optional<io::FrameSize> size = pipeline::image_frame_size(
      images, height ? std::optional<int64_t>(cfg.generate.height) : std::nullopt,
      width ? std::optional<int64_t>(cfg.generate.width) : std::nullopt, area, spatial * video.patch, where);
  if (size) {
    cfg.generate.height = static_cast<int>(size->height);
    cfg.generate.width = static_cast<int>(size->width);
  }
  return cfg;
}

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
  req.step_cache = step_cache_settings(cfg, where, pipe.transformer());
  return req;
}

pipeline::RunMemoryPlan setup_run_memory(const RunConfig& cfg, const CliOptions& opts, pipeline::Pipeline& pipe,
                                         const pipeline::Request& req, const parallel::Layout& layout,
                                         const DeviceChoice& device, double process_bytes) {
  const parallel::Workload work = pipe.workload(cfg.generate, req.latent_shape);
  const int64_t images = std::min<int64_t>(std::max(1, cfg.generate.batch_size), req.outputs());
  const parallel::PlanRow row = parallel::plan_layout(layout, work, images, cfg.generate.guidance_scale > 1.0,
                                                      element_sizing(cfg, device, pipe).bytes);
  const pipeline::RunMemoryInputs in = run_memory_inputs(cfg, pipe, device, row, req.latent_shape, process_bytes);
  pipeline::RunMemoryPlan plan =
      pipeline::plan_run(pipe, in, cfg.vae, memory_limit_bytes(opts, process_bytes, parallel::MpiRuntime::local_size()),
                         opts.memory_limit_gib > 0 && device.device == Device::kCPU, opts.config_path);
  pipe.set_vae_tiles(plan.tiling.grid);
  return plan;
}

std::vector<std::unique_ptr<io::OutputWriter>> make_output_writers(const OutputConfig& out, int outputs, int frames,
                                                                   const std::string& config_json,
                                                                   const std::vector<std::string>& names,
                                                                   const std::string& run_json) {
  const io::OutputPlan plan{out.path, outputs, frames, names};
  std::vector<std::unique_ptr<io::OutputWriter>> w;
  if (out.format == OutputFormat::kMp4)  // one video per output (an image: a one-frame video)
    w.push_back(io::make_mp4_writer(plan, out.fps, out.crf));
  else  // "png": one file per image, or per frame of a video
    w.push_back(frames == 1 ? io::make_png_writer(plan) : io::make_png_frames_writer(plan));
  if (out.grid) {
    io::PngText text = {{"ditgen_config", config_json}};
    if (!run_json.empty()) text.emplace_back("ditgen_run", run_json);
    w.push_back(io::make_contact_sheet_writer(plan, text));
  }
  return w;
}

void probe_outputs(const std::vector<std::unique_ptr<io::OutputWriter>>& writers, const std::string& manifest,
                   const CliOptions& opts) {
  // Every target is checked before any folder is created or probed.
  for (const auto& w : writers)
    for (const std::string& path : w->planned_paths()) refuse_unusable_target(path, "output.path");
  refuse_unusable_target(manifest, "output.path (its manifest)");
  for (const auto& w : writers)
    for (const std::string& path : w->planned_paths()) probe_writable_file(path, "output.path");
  if (!opts.save_latents.empty()) probe_writable_file(opts.save_latents, "--save-latents");
  if (!opts.pab_stats.empty()) probe_writable_file(opts.pab_stats, "--pab-stats");
  if (!opts.cache_stats.empty()) probe_writable_file(opts.cache_stats, "--cache-stats");
  if (!opts.pab_analyze.empty()) {
    refuse_unusable_target(opts.pab_analyze + "/pab.csv", "--pab-analyze");
    probe_writable_dir(opts.pab_analyze, "--pab-analyze");
  }
}

}  // namespace ditgen::cli
