// bench_vae_decode: times ditgen's VAE decode (diffusers AutoencoderKL's
// decoder, or a causal video VAE's, AutoencoderKLWan's or AutoencoderKLCogVideoX's, through the VAE
// seam's stream) of one random
// latent on the CPU. A benchmark, not a test; driven by
// scripts/bench/bench_cpu.py, which runs diffusers' decode of the same size
// beside it (AutoencoderKL only).
//
//   bench_vae_decode --model DIR [--size 512] [--height H --width W] [--frames 5]
//                    [--dtype float32|bfloat16] [--repeat 3] [--warmup 1] [--threads 2] [--profile]
//                    [--tiling] [--tile-min PIXELS --tile-stride PIXELS]
//
// DIR is a diffusers model root (model_index.json + vae/) or the vae
// directory itself; --size is the decoded image's side (--height / --width
// for a non-square one; the latent is that / the spatial factor). For a
// video VAE (vae/config.json _class_name AutoencoderKLWan, AutoencoderKLCogVideoX)
// --frames (1 + 4k for Wan's, 1 + 8k for CogVideoX's; default 5) output
// frames are decoded: their latent frames in the VAE's chunks through one
// stream, as Pipeline::decode does (models/vae_decode.h); --tiling decodes
// in spatial tiles (the VAE's diffusers defaults, or square tiles of
// --tile-min pixels every --tile-stride). Output is one `key value` line
// per figure:
//   decode_seconds <median>   decode_all <t1,t2,...>   peak_rss_bytes <n>
//   (video) output_bytes <the decoded frames>  estimate_bytes <VaeSpec::decode_bytes, untiled>
// and with --profile the per-op table of util/profile.h between
// `profile_begin` and `profile_end` (summed over the timed repeats).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/autoencoder_kl.h"
#include "models/registry.h"
#include "models/vae_decode.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

using namespace ditgen;

namespace {

struct Args {
  std::string model, dtype = "float32";
  int64_t size = 512, height = 0, width = 0, frames = 5;
  int repeat = 3, warmup = 1, threads = 2;
  bool profile = false, tiling = false;
  int64_t tile_min = 0, tile_stride = 0;  // 0: the VAE's defaults
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_vae_decode --model DIR [--size 512] [--height H --width W] [--frames 5] "
               "[--dtype float32|bfloat16] [--repeat 3] [--warmup 1] [--threads 2] [--profile] "
               "[--tiling] [--tile-min PIXELS --tile-stride PIXELS]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--model") a.model = value();
    else if (k == "--size") a.size = std::stoll(value());
    else if (k == "--height") a.height = std::stoll(value());
    else if (k == "--width") a.width = std::stoll(value());
    else if (k == "--frames") a.frames = std::stoll(value());
    else if (k == "--dtype") a.dtype = value();
    else if (k == "--repeat") a.repeat = std::stoi(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--profile") a.profile = true;
    else if (k == "--tiling") a.tiling = true;
    else if (k == "--tile-min") a.tile_min = std::stoll(value());
    else if (k == "--tile-stride") a.tile_stride = std::stoll(value());
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  if (a.height == 0) a.height = a.size;
  if (a.width == 0) a.width = a.size;
  if (a.model.empty() || a.height < 8 || a.width < 8 || a.frames < 1 || a.repeat < 1 || a.warmup < 0 || a.threads < 1 ||
      (a.dtype != "float32" && a.dtype != "bfloat16"))
    usage(2);
  return a;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void report(const std::vector<double>& times, double checksum, const Args& a) {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("output_sum %.6g\ndecode_seconds %.4f\ndecode_all ", checksum, bench::median(times));
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("\npeak_rss_bytes %lld\n", static_cast<long long>(ru.ru_maxrss) * 1024);
  if (a.profile)
    std::printf("profile_begin (summed over %d decodes)\n%sprofile_end\n", a.repeat, profile::report().c_str());
}

// A causal video VAE (Wan's, CogVideoX's), through the registry's VAE seam:
// one random latent video through one stream in the chunks the VAE says
// (latent_chunks), as Pipeline::decode feeds it.
int run_video(const Args& a, const std::string& dir, const nlohmann::json& json, const std::string& cfg_path) {
  const std::unique_ptr<models::VaeSpec> vae = models::vae_spec(json, cfg_path);
  const models::VaeSpec& spec = *vae;
  spec.check_frames(a.frames, "--frames");
  const int64_t f = spec.spatial_factor();
  if (a.height % f || a.width % f)
    throw ConfigError("--height / --width: multiples of " + std::to_string(f) + " for this VAE");
  const DType dtype = a.dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  const auto decoder = spec.load(io::WeightStore::open_dir(dir), {Device::kCPU, dtype});
  const int64_t c = spec.latent_channels(), n = spec.latent_frames_of(a.frames), h = a.height / f, w = a.width / f;
  Tensor z = Tensor::empty({c, n, h, w});  // (C, F', h, w), as the stream takes it
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < z.numel(); ++i) z[i] = dist(rng);
  std::printf("dtype %s\nvideo %lld frames of %lldx%lld\n", dtype_name(dtype), static_cast<long long>(a.frames),
              static_cast<long long>(a.height), static_cast<long long>(a.width));
  std::optional<models::nn::TileGrid> tiles;
  if (a.tiling) {
    models::nn::TileSampleSizes sizes = spec.default_tile_sizes();
    if (a.tile_min > 0) sizes.min_height = sizes.min_width = a.tile_min;
    if (a.tile_stride > 0) sizes.stride_height = sizes.stride_width = a.tile_stride;
    tiles = models::nn::tile_grid(sizes, f);
    std::printf("tiles %lldx%lld every %lld\n", static_cast<long long>(sizes.min_width),
                static_cast<long long>(sizes.min_height), static_cast<long long>(sizes.stride_width));
  }
  Tensor out = Tensor::empty({spec.frames_of(n), spec.out_channels(), a.height, a.width});
  std::printf("output_bytes %lld\nestimate_bytes %.0f\n", static_cast<long long>(out.numel() * 4),
              spec.decode_bytes(h, w));
  std::vector<double> times;
  double checksum = 0;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    if (r == a.warmup && a.profile) profile::reset();
    const double t0 = now();
    models::decode_latents(*decoder, spec, z, out, tiles);
    const double dt = now() - t0;
    if (r == 0)
      for (int64_t j = 0; j < out.numel(); ++j) checksum += out[j];
    if (r >= a.warmup) times.push_back(dt);
  }
  report(times, checksum, a);
  return 0;
}

int run(const Args& a) {
  namespace fs = std::filesystem;
  std::string dir = a.model;
  if (fs::exists(fs::path(dir) / "model_index.json")) dir = io::ModelDir::open(dir).part_dir("vae");
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const nlohmann::json json = io::read_json_file(cfg_path);
  if (io::get_string_or(json, "_class_name", "", cfg_path) != "AutoencoderKL") return run_video(a, dir, json, cfg_path);
  const models::AutoencoderKLConfig cfg = models::AutoencoderKLConfig::from_json(json, cfg_path);
  if (a.height != a.width) throw ConfigError("--height / --width: AutoencoderKL takes a square --size only");
  const DType dtype = a.dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  const models::AutoencoderKL vae = models::AutoencoderKL::load(io::WeightStore::open_dir(dir), cfg, {Device::kCPU, dtype});
  const int64_t side = a.size / cfg.scale_factor();
  Tensor z = Tensor::empty({1, cfg.latent_channels, side, side});
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < z.numel(); ++i) z[i] = dist(rng);
  std::printf("dtype %s\nimage %lldx%lld\n", dtype_name(dtype), static_cast<long long>(a.size),
              static_cast<long long>(a.size));
  std::vector<double> times;
  double checksum = 0;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    if (r == a.warmup && a.profile) profile::reset();
    const double t0 = now();
    const Tensor img = vae.decode(z);
    const double dt = now() - t0;
    if (r >= a.warmup) times.push_back(dt);
    if (r == 0)
      for (int64_t i = 0; i < img.numel(); ++i) checksum += img[i];
  }
  report(times, checksum, a);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ops::set_num_threads(a.threads);
  profile::enable(a.profile);
  try {
    return run(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_vae_decode: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_vae_decode: %s\n", e.what());
    return 1;
  }
}
