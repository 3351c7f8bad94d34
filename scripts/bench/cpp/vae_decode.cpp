// bench_vae_decode: times ditgen's VAE decode (diffusers AutoencoderKL's
// decoder) of one random latent on the CPU. A benchmark, not a test; driven
// by scripts/bench/bench_cpu.py, which runs diffusers' decode of the same size
// beside it.
//
//   bench_vae_decode --model DIR [--size 512] [--dtype float32|bfloat16] [--repeat 3] [--warmup 1]
//                    [--threads 2] [--profile]
//
// DIR is a diffusers model root (model_index.json + vae/) or the vae
// directory itself; --size is the decoded image's side (the latent is
// size / scale_factor). Output is one `key value` line per figure:
//   decode_seconds <median>   decode_all <t1,t2,...>   peak_rss_bytes <n>
// and with --profile the per-op table of util/profile.h between
// `profile_begin` and `profile_end` (summed over the timed repeats).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/autoencoder_kl.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

using namespace ditgen;

namespace {

struct Args {
  std::string model, dtype = "float32";
  int64_t size = 512;
  int repeat = 3, warmup = 1, threads = 2;
  bool profile = false;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_vae_decode --model DIR [--size 512] [--dtype float32|bfloat16] [--repeat 3] "
               "[--warmup 1] [--threads 2] [--profile]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--model") a.model = value();
    else if (k == "--size") a.size = std::stoll(value());
    else if (k == "--dtype") a.dtype = value();
    else if (k == "--repeat") a.repeat = std::stoi(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--profile") a.profile = true;
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  if (a.model.empty() || a.size < 8 || a.repeat < 1 || a.warmup < 0 || a.threads < 1 ||
      (a.dtype != "float32" && a.dtype != "bfloat16"))
    usage(2);
  return a;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int run(const Args& a) {
  namespace fs = std::filesystem;
  std::string dir = a.model;
  if (fs::exists(fs::path(dir) / "model_index.json")) dir = io::ModelDir::open(dir).part_dir("vae");
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const models::AutoencoderKLConfig cfg = models::AutoencoderKLConfig::from_json(io::read_json_file(cfg_path), cfg_path);
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
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("output_sum %.6g\ndecode_seconds %.4f\ndecode_all ", checksum, bench::median(times));
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("\npeak_rss_bytes %lld\n", static_cast<long long>(ru.ru_maxrss) * 1024);
  if (a.profile)
    std::printf("profile_begin (summed over %d decodes)\n%sprofile_end\n", a.repeat, profile::report().c_str());
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
