// bench_vae_decode: times ditgen's VAE decode (diffusers AutoencoderKL's
// decoder, or a causal video VAE's, AutoencoderKLWan's or AutoencoderKLCogVideoX's, through the VAE
// seam's stream) of one random
// latent on the CPU. A benchmark, not a test; driven by
// scripts/bench/bench_cpu.py, which runs diffusers' decode of the same size
// beside it (AutoencoderKL only).
//
//   bench_vae_decode --model DIR [--size 512] [--height H --width W] [--frames 5]
//                    [--dtype float32|bfloat16] [--repeat 3] [--warmup 1] [--threads 2] [--profile]
//                    [--tiling] [--tile-min PIXELS --tile-stride PIXELS] [--encode]
//                    [--save-output FILE.safetensors]
//
// DIR is a diffusers model root (model_index.json + vae/) or the vae
// directory itself; --size is the decoded image's side (--height / --width
// for a non-square one; the latent is that / the spatial factor). For a
// video VAE (vae/config.json _class_name AutoencoderKLWan, AutoencoderKLCogVideoX)
// --frames (1 + 4k for Wan's, 1 + 8k for CogVideoX's; default 5) output
// frames are decoded: their latent frames in the VAE's chunks through one
// stream, as Pipeline::decode does (models/vae_decode.h); --tiling decodes
// in spatial tiles (the VAE's diffusers defaults, or square tiles of
// --tile-min pixels every --tile-stride). --encode times the VAE's encoder
// instead (VaeSpec::load_encoder; Wan's) on a random video of those
// frames and size, tiled as diffusers' tiled_encode under --tiling; its
// figures are named encode_*. --save-output writes a video decode's
// latents (C, F', h, w) and raw frames (F, C, H, W) as float32 "latents" and
// "output" (scripts/bench/bench_video_models.py --compare decodes the same
// latents with diffusers). Output is one `key value` line per figure:
//   decode_seconds <median>   decode_all <t1,t2,...>   peak_rss_bytes <n>
//   (video) output_bytes <the decoded frames>  estimate_bytes <VaeSpec::decode_bytes, untiled>
// and with --profile the per-op table of util/profile.h between
// `profile_begin` and `profile_end` (summed over the timed repeats).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
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
  bool profile = false, tiling = false, encode = false;
  int64_t tile_min = 0, tile_stride = 0;  // 0: the VAE's defaults
  std::string save_output;                 // a video decode's latents and frames, when given
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_vae_decode --model DIR [--size 512] [--height H --width W] [--frames 5] "
               "[--dtype float32|bfloat16] [--repeat 3] [--warmup 1] [--threads 2] [--profile] "
               "[--tiling] [--tile-min PIXELS --tile-stride PIXELS] [--encode] [--save-output FILE]\n");
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
    else if (k == "--encode") a.encode = true;
    else if (k == "--save-output") a.save_output = value();
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
  const char* what = a.encode ? "encode" : "decode";
  std::printf("output_sum %.6g\n%s_seconds %.4f\n%s_all ", checksum, what, bench::median(times), what);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("\npeak_rss_bytes %lld\n", static_cast<long long>(ru.ru_maxrss) * 1024);
  if (a.profile)
    std::printf("profile_begin (summed over %d %ss)\n%sprofile_end\n", a.repeat, what, profile::report().c_str());
}

// Timed runs of `once` (warmup first), the first's output summed.
void timed(const Args& a, const std::function<Tensor()>& once) {
  std::vector<double> times;
  double checksum = 0;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    if (r == a.warmup && a.profile) profile::reset();
    const double t0 = now();
    const Tensor out = once();
    const double dt = now() - t0;
    if (r == 0)
      for (int64_t j = 0; j < out.numel(); ++j) checksum += out[j];
    if (r >= a.warmup) times.push_back(dt);
  }
  report(times, checksum, a);
}

Tensor random_normal(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = dist(rng);
  return t;
}

// --encode: a random video in [-1, 1] through the VAE's encoder.
int run_encode(const Args& a, const std::string& dir, const models::VaeSpec& spec, DType dtype,
               const std::optional<models::nn::TileSampleSizes>& sizes) {
  const auto encoder = spec.load_encoder(io::WeightStore::open_dir(dir), {Device::kCPU, dtype});
  Tensor video = random_normal({3, a.frames, a.height, a.width});
  for (int64_t i = 0; i < video.numel(); ++i) video[i] = std::clamp(video[i] / 3.0f, -1.0f, 1.0f);
  std::optional<models::nn::TileGrid> tiles;
  if (sizes) tiles = models::nn::encode_tile_grid(*sizes, spec.spatial_factor());
  timed(a, [&] { return encoder->encode(video, tiles); });
  return 0;
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
  const int64_t c = spec.latent_channels(), n = spec.latent_frames_of(a.frames), h = a.height / f, w = a.width / f;
  std::printf("dtype %s\nvideo %lld frames of %lldx%lld\n", dtype_name(dtype), static_cast<long long>(a.frames),
              static_cast<long long>(a.height), static_cast<long long>(a.width));
  std::optional<models::nn::TileSampleSizes> sizes;
  if (a.tiling) {
    sizes = spec.default_tile_sizes();
    if (a.tile_min > 0) sizes->min_height = sizes->min_width = a.tile_min;
    if (a.tile_stride > 0) sizes->stride_height = sizes->stride_width = a.tile_stride;
    std::printf("tiles %lldx%lld every %lld\n", static_cast<long long>(sizes->min_width),
                static_cast<long long>(sizes->min_height), static_cast<long long>(sizes->stride_width));
  }
  if (a.encode) return run_encode(a, dir, spec, dtype, sizes);
  const auto decoder = spec.load(io::WeightStore::open_dir(dir), {Device::kCPU, dtype});
  const Tensor z = random_normal({c, n, h, w});  // (C, F', h, w), as the stream takes it
  std::optional<models::nn::TileGrid> tiles;
  if (sizes) tiles = models::nn::tile_grid(*sizes, f);
  Tensor out = Tensor::empty({spec.frames_of(n), spec.out_channels(), a.height, a.width});
  std::printf("output_bytes %lld\nestimate_bytes %.0f\n", static_cast<long long>(out.numel() * 4),
              spec.decode_bytes(h, w));
  timed(a, [&] {
    models::decode_latents(*decoder, spec, z, out, tiles);
    return out;
  });
  if (!a.save_output.empty()) io::write_safetensors(a.save_output, {{"latents", z}, {"output", out}});
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
  const Tensor z = random_normal({1, cfg.latent_channels, side, side});
  std::printf("dtype %s\nimage %lldx%lld\n", dtype_name(dtype), static_cast<long long>(a.size),
              static_cast<long long>(a.size));
  timed(a, [&] { return vae.decode(z); });
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
