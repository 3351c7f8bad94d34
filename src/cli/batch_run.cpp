#include "cli/batch_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "cli/batch_manifest.h"
#include "cli/layout_setup.h"
#include "io/output_paths.h"
#include "tensor/device_memory.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/interrupt_report.h"
#include "util/progress.h"
#include "util/run_stage.h"
#include "util/strings.h"

namespace ditgen::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// One output's files for its "wrote" line: the file, or a video's PNG
// frames as "first ... last (N files)".
std::string files_text(const std::vector<std::string>& files) {
  if (files.empty()) return "nothing";
  if (files.size() == 1) return files.front();
  return files.front() + " ... " + files.back() + " (" + std::to_string(files.size()) + " files)";
}

// An output's input images (image-to-video) for its webui parameters:
// ", Image: first.png (sha256 0123456789ab)[, Last image: ...]".
std::string image_parameters(const nlohmann::json& images) {
  std::string text;
  for (const auto& [key, name] : {std::pair{"image", "Image"}, std::pair{"last_image", "Last image"}})
    if (images.contains(key))
      text += std::string(", ") + name + ": " + images[key].get<std::string>() + " (sha256 " +
              images[std::string(key) + "_sha256"].get<std::string>().substr(0, 12) + ")";
  return text;
}

// webui "parameters": the class (or prompt) on the first line, then
// settings; a video's frame count after its size.
std::string png_parameters(const std::string& label, const std::string& negative, const RunConfig& cfg,
                           const std::string& sampler, uint64_t seed, int width, int height, int frames,
                           const std::string& ran) {
  std::string model = std::filesystem::path(cfg.model.path).lexically_normal().filename().string();
  if (model.empty()) model = std::filesystem::path(cfg.model.path).lexically_normal().parent_path().filename();
  // webui puts the negative prompt on its own line after the prompt.
  const std::string negative_line = negative.empty() ? "" : "\nNegative prompt: " + negative;
  return label + negative_line + "\nSteps: " + std::to_string(cfg.generate.steps) + ", Sampler: " + sampler +
         ", CFG scale: " + format_number(cfg.generate.guidance_scale) + ", Seed: " + std::to_string(seed) +
         ", Size: " + std::to_string(width) + "x" + std::to_string(height) +
         (frames > 1 ? ", Frames: " + std::to_string(frames) : std::string()) + ", Model: " + model + ran;
}

// The manifest line of output i.
nlohmann::json manifest_line(const BatchInputs& in, int64_t i, const std::vector<std::string>& files,
                             std::optional<double> seconds) {
  const pipeline::Request& req = *in.req;
  nlohmann::json line = {{"index", i}, {"files", files}};
  if (req.labels.empty()) {
    line["prompt"] = req.prompts[static_cast<size_t>(i)];
    if (!req.negative_of(i).empty()) line["negative_prompt"] = req.negative_of(i);
  } else {
    line["label"] = req.labels[static_cast<size_t>(i)];
    line["class_name"] = req.captions[static_cast<size_t>(i)];
  }
  if (!in.lines.empty()) line["line"] = in.lines[static_cast<size_t>(i)];
  if (!req.images.empty()) line.update(pipeline::image_metadata(req.images[static_cast<size_t>(i)]));
  line["seed"] = req.seed_of(i);
  line["steps"] = req.steps;
  line["seconds"] = seconds ? nlohmann::json(std::round(*seconds * 1000.0) / 1000.0) : nlohmann::json(nullptr);
  return line;
}

// The output's size in pixels: its latents' times the VAE's factor.
std::pair<int, int> output_size(const BatchInputs& in) {
  const Shape& latent = in.req->latent_shape;
  const int64_t factor = in.pipe->vae().factors().spatial;
  return {static_cast<int>(latent[latent.size() - 2] * factor), static_cast<int>(latent.back() * factor)};
}

// The files of the whole run (the contact sheet), once every output is in
// the writers: those this run made or recomputed came through write() or
// add_existing(); the ones an earlier run made (`on_disk`) are read back
// from their files (--resume: the sheet shows every output present). A
// file that cannot be read back leaves the sheet unwritten, said once.
void finish_whole_run(const BatchInputs& in, const std::vector<int64_t>& on_disk, BatchOutcome& out) {
  const std::string grid = io::grid_path_for(in.cfg->output.path);
  if (!on_disk.empty() && in.cfg->output.grid) {
    const auto [height, width] = output_size(in);
    for (const int64_t i : on_disk) {
      io::OutputItem item;
      item.index = static_cast<int>(i);
      item.caption = in.req->captions[static_cast<size_t>(i)];
      for (const auto& writer : *in.writers)
        if (!item.frames.defined()) item.frames = writer->read_back(item.index, height, width);
      if (!item.frames.defined()) {
        if (!in.quiet)
          std::fprintf(stderr, "ditgen: the contact sheet %s is not written: output %lld's files (%s) cannot be read "
                               "back at %dx%d\n",
                       grid.c_str(), static_cast<long long>(i),
                       files_text(in.work->files[static_cast<size_t>(i)]).c_str(), width, height);
        return;
      }
      for (auto& writer : *in.writers) writer->add_existing(item);
    }
  }
  for (auto& writer : *in.writers)
    for (auto& path : writer->finish()) {
      if (!in.quiet)
        std::fprintf(stderr, "ditgen: wrote %s (the contact sheet%s)\n", path.c_str(),
                     on_disk.empty() ? "" : ", with the outputs an earlier run made");
      out.written.push_back(std::move(path));
    }
}

}  // namespace

BatchOutcome run_batch(const BatchInputs& in, bool keep_latents) {
  const pipeline::Request& all = *in.req;
  const pipeline::Pipeline& pipe = *in.pipe;
  const std::vector<int64_t>& pending = in.work->pending;
  const int64_t total = all.outputs(), todo = static_cast<int64_t>(pending.size());
  BatchOutcome out;
  out.scheduler = pipe.sampler_of(all);

  std::optional<Manifest> manifest;
  if (in.output_rank) {
    manifest.emplace(io::manifest_path_for(in.cfg->output.path), in.cfg->output.skip_existing);
    // Outputs found on disk without a line (made before manifests, or the
    // manifest removed) get one, so the manifest lists what is there.
    if (in.cfg->output.skip_existing) {
      std::vector<bool> is_pending(static_cast<size_t>(total), false);
      for (const int64_t i : pending) is_pending[static_cast<size_t>(i)] = true;
      for (int64_t i = 0; i < total; ++i)
        if (!is_pending[static_cast<size_t>(i)] && !manifest->has(static_cast<int>(i)))
          manifest->append(manifest_line(in, i, in.work->files[static_cast<size_t>(i)], std::nullopt));
    }
    if (!in.quiet && todo < total)
      std::fprintf(stderr, "ditgen: %lld of %lld outputs already on disk (output.skip_existing), %lld to make\n",
                   static_cast<long long>(total - todo), static_cast<long long>(total),
                   static_cast<long long>(todo));
  }
  if (keep_latents && todo != total)
    throw ConfigError("--save-latents: needs every output generated, but " + std::to_string(total - todo) +
                      " exist and are skipped (output.skip_existing / --resume)");
  if (todo == 0) {
    // Every output is there; a contact sheet an interrupted run never wrote is made from them.
    std::error_code ec;
    if (in.output_rank && in.cfg->output.grid && !std::filesystem::exists(io::grid_path_for(in.cfg->output.path), ec)) {
      std::vector<int64_t> all_outputs(static_cast<size_t>(total));
      for (int64_t i = 0; i < total; ++i) all_outputs[static_cast<size_t>(i)] = i;
      finish_whole_run(in, all_outputs, out);
    }
    return out;
  }

  // Model batches are the uninterrupted run's: outputs [k B, (k+1) B). A
  // result depends (in its last bits) on the batch it was computed in, so a
  // batch with any output to make runs whole, and only the outputs to make
  // are written: a resumed run's files are the uninterrupted run's, byte
  // for byte, at the price of recomputing at most B - 1 finished outputs.
  const int64_t batch = std::max(1, all.batch_size);
  std::vector<bool> to_write(static_cast<size_t>(total), false);
  for (const int64_t i : pending) to_write[static_cast<size_t>(i)] = true;
  std::vector<int64_t> run;  // whole model batches, in order
  for (int64_t first = 0; first < total; first += batch) {
    const int64_t end = std::min(total, first + batch);
    if (std::any_of(to_write.begin() + first, to_write.begin() + end, [](bool b) { return b; }))
      for (int64_t i = first; i < end; ++i) run.push_back(i);
  }

  // Stage 1, once for every output to make: the text encoder runs on each
  // distinct prompt (and negative) and is released before denoising.
  const pipeline::Request work = all.select(run);
  pipeline::Conditions cond;
  {
    const char* stage = pipe.condition_stage();
    std::optional<Progress> progress;
    if (stage) progress.emplace(1, !in.quiet, stage);
    StageScope scope(stage ? stage : "conditioning");
    cond = pipe.condition(work);
    if (progress) progress->step_done(0);
  }

  const auto batch_start = Clock::now();
  int64_t done = 0;  // outputs made so far
  const int64_t runs = static_cast<int64_t>(run.size());
  for (int64_t first = 0; first < runs; first += batch) {
    const int64_t count = std::min(batch, runs - first);
    const auto chunk_start = Clock::now();
    const pipeline::Request chunk = work.slice(first, count);
    // The batch's place in the run, and its ETA from the outputs made so far.
    std::string label = "outputs " + std::to_string(total - todo + done) + "/" + std::to_string(total);
    if (done > 0) label += ", ETA " + format_duration(seconds_since(batch_start) / static_cast<double>(done) *
                                                    static_cast<double>(todo - done));
    std::optional<Progress> progress;
    progress.emplace(chunk.steps, !in.quiet, label);
    Tensor latents;
    {
      StageScope scope("denoise");
      latents = pipe.denoise(chunk, cond.slice(first, count),
                             [&](int step, int, int, int) {
                               inject_test_kill(in.world_rank, out.forwards + step + 1);
                               progress->step_done(step);
                             },
                             &out.pab);
    }
    progress.reset();
    out.forwards += chunk.steps;
    if (keep_latents) {
      if (!out.latents.defined()) {
        Shape shape = latents.shape();
        shape[0] = total;
        out.latents = Tensor::empty(shape);
      }
      out.latents.slice0(first, first + count).copy_from(latents);
    }
    int64_t made_here = 0;
    for (int64_t j = 0; j < count; ++j) made_here += to_write[static_cast<size_t>(run[static_cast<size_t>(first + j)])];
    if (!in.output_rank) {
      // The output rank decodes now; this rank's activations go back to
      // the system first (the host block cache would keep them), so ranks
      // sharing a machine leave the decode their room.
      device_memory::release_cached_host();
      done += made_here;
      continue;
    }
    StageScope scope("decode and write");
    const Tensor frames = pipe.decode(latents);
    const double seconds = seconds_since(chunk_start) / static_cast<double>(made_here);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = run[static_cast<size_t>(first + j)];
      io::OutputItem item;
      item.index = static_cast<int>(i);
      item.frames = frames.slice0(j, j + 1).reshape({frames.dim(1), frames.dim(2), frames.dim(3), frames.dim(4)});
      item.caption = all.captions[static_cast<size_t>(i)];
      if (!to_write[static_cast<size_t>(i)]) {  // on disk already: recomputed for its batch-mates
        for (auto& writer : *in.writers) writer->add_existing(item);  // the contact sheet's cell, exactly
        continue;
      }
      const int h = static_cast<int>(item.frames.dim(2)), w = static_cast<int>(item.frames.dim(3));
      // The input images: their paths and SHA-256 in the parameters (the
      // MP4 comment) and, for a PNG, a text chunk of their own.
      const nlohmann::json images = all.images.empty() ? nlohmann::json::object()
                                                       : pipeline::image_metadata(all.images[static_cast<size_t>(i)]);
      item.text = {{"parameters", png_parameters(item.caption, all.labels.empty() ? all.negative_of(i) : "",
                                                 *in.cfg, sched::name_of(out.scheduler), all.seed_of(i), w, h,
                                                 static_cast<int>(frames.dim(1)),
                                                 image_parameters(images) + in.ran_parameters)},
                   {"ditgen_config", in.config_json},
                   {"ditgen_run", in.ran_json}};
      if (!images.empty()) item.text.emplace_back("ditgen_images", images.dump());
      // Its files and its manifest line land together (or, on a signal
      // before the first rename, neither).
      LandingScope landing;
      std::vector<std::string> files;
      for (auto& writer : *in.writers)
        for (auto& path : writer->write(item)) files.push_back(std::move(path));
      manifest->append(manifest_line(in, i, files, seconds));
      note_output_landed();
      if (!in.quiet) std::fprintf(stderr, "ditgen: wrote %s\n", files_text(files).c_str());
      out.written.insert(out.written.end(), files.begin(), files.end());
      ++out.made;
    }
    done += made_here;
  }
  // What needs every output (the contact sheet): a resumed run reads back
  // the outputs of whole batches it skipped.
  if (in.output_rank) {
    std::vector<bool> in_memory(static_cast<size_t>(total), false);
    for (const int64_t i : run) in_memory[static_cast<size_t>(i)] = true;
    std::vector<int64_t> on_disk;
    for (int64_t i = 0; i < total; ++i)
      if (!in_memory[static_cast<size_t>(i)]) on_disk.push_back(i);
    finish_whole_run(in, on_disk, out);
  }
  return out;
}

}  // namespace ditgen::cli
