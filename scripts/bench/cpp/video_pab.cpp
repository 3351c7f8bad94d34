// bench_video_pab: PAB's and the step caches' speed/quality trade-off on
// the default video model (samples/latte-shapes), as the PAB paper's
// quality table: one process, the same seeds for every configuration. A benchmark, not a test (run it on
// an otherwise idle machine).
//
//   bench_video_pab [--config configs/default.json] [--rounds 2] [--threads 2]
//
// Outputs: 36 of the 180 captions, every colour, shape and motion (the
// training script's check set; the quality test,
// tests/pipeline/test_video_default_model.cpp, runs all 180) with the config's
// steps, guidance, seed and batch. Configurations: PAB off, then spatial /
// temporal / cross ranges 2/3/6 (VideoSys's Latte pyramid), 2/4/6, 3/5/7
// and 5/7/9, each in the window 100 < t < 800 (no MLP broadcast); with
// --caches instead: PAB 2/4/6, First-Block Cache and TeaCache at several
// thresholds (TeaCache with the identity rescale: nobody has calibrated
// coefficients for this model), and PAB 2/4/6 with each cache. For
// each: the end-to-end time of generate() (text encoder + denoising + VAE
// decode; the median over alternating rounds, so a shared machine's drift
// hits every configuration alike), the speed-up against off, mean PSNR
// (identical frames as 100 dB) and SSIM of all frames against off's, and the quality test's measure of
// colour, shape and motion agreement (src/eval/motion_measure.h).
#include <array>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"
#include "config/config.h"
#include "config/device_choice.h"
#include "eval/image_metrics.h"
#include "eval/motion_measure.h"
#include "eval/shape_classifier.h"
#include "io/png.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "util/error.h"

using namespace ditgen;
using bench::median;

namespace {

struct Args {
  std::string config = "configs/default.json";
  int rounds = 2, threads = 2;
  bool caches = false;
  std::vector<double> coefficients;  // --coefficients: TeaCache's, or empty = identity
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout, "usage: bench_video_pab [--config FILE] [--rounds 2] [--threads 2] [--caches [--coefficients c4,c3,c2,c1,c0]]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--config") a.config = value();
    else if (k == "--rounds") a.rounds = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--caches") a.caches = true;
    else if (k == "--coefficients") {
      a.coefficients = bench::parse_coefficients(value());
      if (a.coefficients.empty()) usage(2);
    }
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  if (a.rounds < 1 || a.threads < 1) usage(2);
  return a;
}

struct Config {
  std::string name;
  pab::Schedule schedule;
  std::optional<pab::StepCacheSettings> cache;
};

pab::Schedule pab_ranges(int s, int t, int c) {
  pab::Schedule schedule;
  schedule[pab::Kind::kSpatial] = {true, s, 100, 800, {}};
  schedule[pab::Kind::kTemporal] = {true, t, 100, 800, {}};
  schedule[pab::Kind::kCross] = {true, c, 100, 800, {}};
  return schedule;
}

std::vector<Config> configs(bool caches, const std::vector<double>& coefficients) {
  std::vector<Config> out{{"off", {}, {}}};
  if (!caches) {
    for (const auto& [s, t, c] : std::vector<std::array<int, 3>>{{2, 3, 6}, {2, 4, 6}, {3, 5, 7}, {5, 7, 9}})
      out.push_back({std::to_string(s) + "/" + std::to_string(t) + "/" + std::to_string(c), pab_ranges(s, t, c), {}});
    return out;
  }
  out.push_back({"PAB 2/4/6", pab_ranges(2, 4, 6), {}});
  const auto settings = bench::step_cache_settings(coefficients);
  for (const auto& [name, cache] : settings) out.push_back({name, {}, cache});
  for (const auto& [name, cache] : settings)
    if (name == "first_block 0.1" || name == "teacache 0.2") out.push_back({"PAB 2/4/6 + " + name, pab_ranges(2, 4, 6), cache});
  return out;
}

struct Caption {
  int colour, shape, motion;
};

// The training script's check set: (c + s + m) % 5 == 0.
std::vector<Caption> captions() {
  std::vector<Caption> out;
  for (int c = 0; c < 6; ++c)
    for (int s = 0; s < 5; ++s)
      for (int m = 0; m < 6; ++m)
        if ((c + s + m) % 5 == 0) out.push_back({c, s, m});
  return out;
}

struct Run {
  std::vector<double> seconds;               // one per round
  std::vector<std::vector<uint8_t>> frames;  // RGB8 per (output, frame)
  int colour = 0, shape = 0, motion = 0;
  int64_t forwards = 0, skipped = 0;  // step cache: the forwards of every batch, and those it skipped
};

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  ops::set_num_threads(a.threads);
  const RunConfig rc = load_config(a.config, {});
  auto pipe = pipeline::Pipeline::open(rc.model.path);
  // The config's model.dtype and model.vae_dtype on this CPU, as ditgen resolves them.
  const DeviceChoice where = choose_device("cpu", rc.model.dtype, "auto", false, 0, ops::cpu_has_bf16());
  pipe->load_weights({}, {where.device, where.dtype}, choose_vae_dtype(rc.model.vae_dtype, where.device));
  std::fprintf(stderr, "model.dtype %s -> %s\n", name_of(rc.model.dtype), dtype_name(where.dtype));
  GenerateConfig g = rc.generate;
  const std::vector<Caption> caps = captions();
  g.prompts.clear();
  for (const Caption& c : caps)
    g.prompts.push_back("a " + eval::shape_colour_names()[c.colour] + " " + eval::shape_names()[c.shape] + " " +
                        eval::motion_names()[c.motion]);
  pipeline::Request base_req = pipe->prepare(g, a.config);
  base_req.text_encoder_dtype = rc.model.dtype;

  const auto cfgs = configs(a.caches, a.coefficients);
  std::vector<Run> runs(cfgs.size());
  int64_t frames = 0, h = 0, w = 0;
  for (int round = 0; round < a.rounds; ++round)
    for (size_t c = 0; c < cfgs.size(); ++c) {
      pipeline::Request req = base_req;
      req.pab = cfgs[c].schedule;
      req.step_cache = cfgs[c].cache;
      const auto start = std::chrono::steady_clock::now();
      const pipeline::Result r = pipe->generate(req);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      runs[c].seconds.push_back(secs);
      std::fprintf(stderr, "round %d %-28s %.2f s", round, cfgs[c].name.c_str(), secs);
      if (req.step_cache)
        std::fprintf(stderr, "  (forwards computed %lld, skipped %lld)", static_cast<long long>(r.pab.step_cache.steps_computed),
                     static_cast<long long>(r.pab.step_cache.steps_skipped));
      std::fprintf(stderr, "\n");
      if (round > 0) continue;  // outputs are identical every round
      runs[c].forwards = r.pab.step_cache.steps_computed + r.pab.step_cache.steps_skipped;
      runs[c].skipped = r.pab.step_cache.steps_skipped;
      frames = r.frames.dim(1), h = r.frames.dim(3), w = r.frames.dim(4);
      for (int64_t i = 0; i < r.frames.dim(0); ++i) {
        std::vector<uint8_t> clip;
        for (int64_t f = 0; f < frames; ++f) {
          const Tensor img = r.frames.slice0(i, i + 1).reshape({frames, 3, h, w}).slice0(f, f + 1).reshape({3, h, w});
          runs[c].frames.push_back(io::float_image_to_rgb8(img));
          clip.insert(clip.end(), runs[c].frames.back().begin(), runs[c].frames.back().end());
        }
        const eval::ClipGuess guess = eval::classify_shape_clip(clip.data(), frames, h, w);
        const Caption& want = caps[static_cast<size_t>(i)];
        runs[c].colour += guess.colour == want.colour;
        runs[c].shape += guess.shape == want.shape;
        runs[c].motion += guess.motion == want.motion;
      }
    }

  const size_t n = caps.size();
  std::printf("%s: model %s, %zu captions x %lld frames, DDIM %d steps, guidance %g, batch %d, %d threads, "
              "median of %d rounds; PAB ranges spatial/temporal/cross in 100 < t < 800\n",
              a.config.c_str(), rc.model.path.c_str(), n, static_cast<long long>(frames), g.steps, g.guidance_scale,
              g.batch_size, a.threads, a.rounds);
  std::printf("| %s | end-to-end s | speed-up | PSNR dB | SSIM | colour | shape | motion |\n",
              a.caches ? "configuration" : "PAB");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const double base = median(runs[0].seconds);
  for (size_t c = 0; c < cfgs.size(); ++c) {
    double psnr_sum = 0, ssim_sum = 0;
    const size_t images = runs[c].frames.size();
    for (size_t i = 0; i < images; ++i) {
      const uint8_t* img = runs[c].frames[i].data();
      const uint8_t* ref = runs[0].frames[i].data();
      psnr_sum += c == 0 ? 0 : bench::capped_psnr(eval::psnr(img, ref, h, w, 3));
      ssim_sum += eval::ssim(img, ref, h, w, 3);
    }
    const double t = median(runs[c].seconds);
    char psnr_text[32];
    std::snprintf(psnr_text, sizeof psnr_text, c == 0 ? "inf" : "%.2f", psnr_sum / static_cast<double>(images));
    std::string name = cfgs[c].name;
    if (cfgs[c].cache)
      name += " (skips " + std::to_string(runs[c].skipped) + "/" + std::to_string(runs[c].forwards) + ")";
    std::printf("| %s | %.2f | %.2fx | %s | %.4f | %d/%zu | %d/%zu | %d/%zu |\n", name.c_str(), t, base / t,
                psnr_text, ssim_sum / static_cast<double>(images), runs[c].colour, n, runs[c].shape, n,
                runs[c].motion, n);
  }
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "bench_video_pab: %s\n", e.what());
  return e.exit_code();
}
