// bench_pab: PAB's speed/quality trade-off on one model, in one process.
// A benchmark, not a test (run it on an otherwise idle machine).
//
//   bench_pab --model DIR [--labels all|207,360] [--steps 50] [--rounds 2] [--threads 2] [--batch 30] [--caches]
//
// Configurations (docs/design.md §5), all from the same seed: PAB off, then
// spatial range r in {2, 3, 4} in the window (100, 800) with MLP broadcast of
// every block at range r + 1; with --caches instead: PAB spatial 2 + mlp 3,
// First-Block Cache and TeaCache at several thresholds
// (bench::step_cache_settings), and that PAB with each cache (the forwards
// skipped in the config's name). For each: the denoising time per step (the
// median over alternating rounds, so a shared machine's drift hits every
// configuration alike), the speed-up against off, the (block, step) outputs
// reused, and against PAB off's images: mean PSNR (identical images as
// 100 dB) and SSIM (src/eval). When
// the model's classes are the coloured shapes of the default model, also the
// class agreement of the shape classifier (the quality test's measure), for
// PAB off too, so the loss PAB causes is visible next to the baseline.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "eval/image_metrics.h"
#include "eval/shape_classifier.h"
#include "io/png.h"
#include "ops/ops.h"
#include "pipeline/class_pipeline.h"
#include "util/error.h"

using namespace ditgen;
using bench::median;

namespace {

struct Args {
  std::string model, labels = "207";
  int steps = 50, rounds = 2, threads = 2, batch = 30;
  bool caches = false;
  std::vector<double> coefficients;  // --coefficients: TeaCache's, or empty = identity
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_pab --model DIR [--labels all|ID,ID,...] [--steps 50] [--rounds 2] [--threads 2] "
               "[--batch 30] [--caches [--coefficients c4,c3,c2,c1,c0]]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--model") a.model = value();
    else if (k == "--labels") a.labels = value();
    else if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--rounds") a.rounds = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--batch") a.batch = std::stoi(value());
    else if (k == "--caches") a.caches = true;
    else if (k == "--coefficients") {
      a.coefficients = bench::parse_coefficients(value());
      if (a.coefficients.empty()) usage(2);
    }
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  if (a.model.empty() || a.steps < 1 || a.rounds < 1 || a.threads < 1 || a.batch < 1) usage(2);
  return a;
}

struct Config {
  std::string name;
  pab::Schedule schedule;
  std::optional<pab::StepCacheSettings> cache;
};

Config pab_config(int r, int blocks) {
  Config c{"spatial" + std::to_string(r) + "+mlp" + std::to_string(r + 1), {}, {}};
  c.schedule[pab::Kind::kSpatial] = {true, r, 100, 800, {}};
  auto& m = c.schedule[pab::Kind::kMlp];
  m = {true, r + 1, 100, 800, {}};
  for (int b = 0; b < blocks; ++b) m.blocks.push_back(b);
  return c;
}

std::vector<Config> configs(int blocks, bool caches, const std::vector<double>& coefficients) {
  std::vector<Config> out{{"off", {}, {}}};
  if (!caches) {
    for (int r = 2; r <= 4; ++r) out.push_back(pab_config(r, blocks));
    return out;
  }
  const Config pab = pab_config(2, blocks);
  out.push_back(pab);
  const auto settings = bench::step_cache_settings(coefficients);
  for (const auto& [name, cache] : settings) out.push_back({name, {}, cache});
  for (const auto& [name, cache] : settings)
    if (name == "first_block 0.1" || name == "teacache 0.2") out.push_back({pab.name + " + " + name, pab.schedule, cache});
  return out;
}

struct Run {
  std::vector<double> seconds_per_step;  // one per round
  std::vector<std::vector<uint8_t>> images;  // RGB8 per output
  int64_t spatial_reused = 0, mlp_reused = 0;
  int64_t forwards = 0, skipped = 0;  // step cache: forwards, and those it skipped
};


// Whether id2label names the shapes classes ("red circle", ...), so the
// classifier's verdict means something.
bool is_shapes_model(const pipeline::ClassPipeline& pipe, const std::vector<int64_t>& labels) {
  const auto& colours = eval::shape_colour_names();
  const auto& shapes = eval::shape_names();
  for (int64_t id : labels)
    if (id >= static_cast<int64_t>(colours.size() * shapes.size()) ||
        pipe.label_name(id) != colours[id / 5] + " " + shapes[id % 5])
      return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  ops::set_num_threads(a.threads);
  const auto pipe = pipeline::ClassPipeline::load(a.model);
  const int64_t classes = pipe.transformer().num_classes();

  pipeline::Request req;
  if (a.labels == "all") {
    for (int64_t id = 0; id < classes; ++id) req.labels.push_back(id);
  } else {
    size_t pos = 0;
    while (pos <= a.labels.size()) {
      const size_t comma = std::min(a.labels.find(',', pos), a.labels.size());
      req.labels.push_back(pipe.label_id(std::stoll(a.labels.substr(pos, comma - pos)), "--labels"));
      pos = comma + 1;
    }
  }
  req.steps = a.steps;
  req.scheduler = sched::Sampler::kDdim;
  req.guidance_scale = 4.0f;
  req.batch_size = a.batch;

  const auto cfgs = configs(static_cast<int>(pipe.transformer().num_layers()), a.caches, a.coefficients);
  std::vector<Run> runs(cfgs.size());
  for (int round = 0; round < a.rounds; ++round)
    for (size_t c = 0; c < cfgs.size(); ++c) {
      req.pab = cfgs[c].schedule;
      req.step_cache = cfgs[c].cache;
      pipeline::PabSummary pab;
      const auto start = std::chrono::steady_clock::now();
      const Tensor latents = pipe.sample(req, {}, &pab);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int batches = static_cast<int>((req.labels.size() + a.batch - 1) / a.batch);
      runs[c].seconds_per_step.push_back(secs / (a.steps * batches));
      std::fprintf(stderr, "round %d %-16s %.4f s/step\n", round, cfgs[c].name.c_str(), secs / (a.steps * batches));
      if (round > 0) continue;  // outputs are identical every round
      runs[c].spatial_reused = pab.kinds[static_cast<int>(pab::Kind::kSpatial)].reused;
      runs[c].mlp_reused = pab.kinds[static_cast<int>(pab::Kind::kMlp)].reused;
      runs[c].forwards = pab.step_cache.steps_computed + pab.step_cache.steps_skipped;
      runs[c].skipped = pab.step_cache.steps_skipped;
      const Tensor frames = pipe.decode(latents);  // (n, 1, 3, H, W)
      for (int64_t i = 0; i < frames.dim(0); ++i)
        runs[c].images.push_back(io::float_image_to_rgb8(
            frames.slice0(i, i + 1).reshape({frames.dim(2), frames.dim(3), frames.dim(4)})));
    }

  const auto shape = pipe.latent_shape();
  const int64_t h = shape[1] * pipe.vae().spatial_factor(), w = shape[2] * pipe.vae().spatial_factor();
  const bool shapes = is_shapes_model(pipe, req.labels);
  std::printf("model %s, %d DDIM steps, guidance 4, %zu outputs (batch %d), %d threads, median of %d rounds\n",
              a.model.c_str(), a.steps, req.labels.size(), a.batch, a.threads, a.rounds);
  std::printf("| config | s/step | speed-up | spatial reused | mlp reused | PSNR dB | SSIM |%s\n",
              shapes ? " class agreement |" : "");
  std::printf("|---|---|---|---|---|---|---|%s\n", shapes ? "---|" : "");
  const double base = median(runs[0].seconds_per_step);
  for (size_t c = 0; c < cfgs.size(); ++c) {
    double psnr_sum = 0, ssim_sum = 0;
    int agree = 0;
    const size_t n = runs[c].images.size();
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* img = runs[c].images[i].data();
      const uint8_t* ref = runs[0].images[i].data();
      psnr_sum += c == 0 ? 0 : bench::capped_psnr(eval::psnr(img, ref, h, w, 3));
      ssim_sum += eval::ssim(img, ref, h, w, 3);
      if (shapes) {
        const auto g = eval::classify_shape_image(img, h, w);
        agree += g.colour == req.labels[i] / 5 && g.shape == req.labels[i] % 5;
      }
    }
    const double t = median(runs[c].seconds_per_step);
    char psnr_text[32];
    std::snprintf(psnr_text, sizeof psnr_text, c == 0 ? "inf" : "%.2f", psnr_sum / n);
    std::string name = cfgs[c].name;
    if (cfgs[c].cache)
      name += " (skips " + std::to_string(runs[c].skipped) + "/" + std::to_string(runs[c].forwards) + ")";
    std::printf("| %s | %.4f | %.2fx | %lld | %lld | %s | %.4f |", name.c_str(), t, base / t,
                static_cast<long long>(runs[c].spatial_reused), static_cast<long long>(runs[c].mlp_reused), psnr_text,
                ssim_sum / n);
    if (shapes) std::printf(" %d/%zu |", agree, n);
    std::printf("\n");
  }
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "bench_pab: %s\n", e.what());
  return e.exit_code();
}
