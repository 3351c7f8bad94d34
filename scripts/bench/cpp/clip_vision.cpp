// bench_clip_vision: times ditgen's CLIP vision encoder (models/clip_vision.h:
// hidden_states[-2], what Wan 2.1 image-to-video conditions on) on random
// pixel values, on the CPU. A benchmark, not a test; driven by
// scripts/bench/bench_clip_vision.py, which times transformers'
// CLIPVisionModel on the same folder beside it.
//
//   bench_clip_vision --model DIR [--dtype float32|bfloat16] [--batch 1] [--repeat 3] [--warmup 1]
//                     [--threads 2] [--pack] [--profile]
//
// DIR is an image_encoder folder (config.json + safetensors, either naming).
// --pack packs the GEMM weights into oneDNN's layout at load (faster GEMMs,
// a slower load: worth it only for many encodes per load). Output is one
// `key value` line per figure:
//   load_seconds <t>  encode_seconds <median>  encode_all <t1,t2,...>
//   encode_cpu_seconds <median CPU time of an encode, all threads>
//   output_sum <checksum>  peak_rss_bytes <n>  weight_bytes <ClipVisionSpec's count>
// and with --profile the per-op table of util/profile.h between
// `profile_begin` and `profile_end` (summed over the timed repeats).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "models/clip_vision.h"
#include "models/clip_vision_spec.h"
#include "ops/ops.h"
#include "util/profile.h"

using namespace ditgen;

namespace {

struct Args {
  std::string model, dtype = "float32";
  int64_t batch = 1;
  int repeat = 3, warmup = 1, threads = 2;
  bool pack = false, profile = false;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_clip_vision --model DIR [--dtype float32|bfloat16] [--batch 1] [--repeat 3] "
               "[--warmup 1] [--threads 2] [--pack] [--profile]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--model") a.model = value();
    else if (k == "--dtype") a.dtype = value();
    else if (k == "--batch") a.batch = std::stoll(value());
    else if (k == "--repeat") a.repeat = std::stoi(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--pack") a.pack = true;
    else if (k == "--profile") a.profile = true;
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  if (a.model.empty() || a.batch < 1 || a.repeat < 1 || a.warmup < 0 || a.threads < 1 ||
      (a.dtype != "float32" && a.dtype != "bfloat16"))
    usage(2);
  return a;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds this process has used, all threads (user + system): on a
// machine shared with other jobs a steadier measure of the work than the
// wall clock.
double cpu_seconds() {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(ru.ru_utime) + seconds(ru.ru_stime);
}

int run(const Args& a) {
  const models::Placement place(Device::kCPU, a.dtype == "bfloat16" ? DType::kBF16 : DType::kF32, a.pack);
  const models::ClipVisionSpec spec = models::clip_vision_spec(a.model);
  const int64_t S = spec.config().image_size;
  const double t0 = now();
  const auto encoder = models::load_clip_vision(a.model, place);
  const double load = now() - t0;

  // Normalised pixels are roughly N(0, 1): uniform [-2, 2] stands in.
  Tensor pixels = Tensor::empty({a.batch, 3, S, S});
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < pixels.numel(); ++i) pixels.data()[i] = dist(rng);

  std::vector<double> times, cpu_times;
  double checksum = 0;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    if (r == a.warmup && a.profile) profile::reset();
    const double start = now(), cpu_start = cpu_seconds();
    const Tensor out = encoder->encode(pixels);
    const double t = now() - start;
    if (r >= a.warmup) {
      times.push_back(t);
      cpu_times.push_back(cpu_seconds() - cpu_start);
    }
    if (r == 0)
      for (int64_t i = 0; i < out.numel(); ++i) checksum += out[i];
  }
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("load_seconds %.4f\nencode_seconds %.4f\nencode_all ", load, bench::median(times));
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? "," : "", times[i]);
  std::printf("\nencode_cpu_seconds %.4f", bench::median(cpu_times));
  std::printf("\noutput_sum %.6g\npeak_rss_bytes %lld\nweight_bytes %.0f\n", checksum,
              static_cast<long long>(ru.ru_maxrss) * 1024, spec.weight_bytes(place));
  if (a.profile)
    std::printf("profile_begin (summed over %d encodes)\n%sprofile_end\n", a.repeat, profile::report().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ops::set_num_threads(a.threads);
  profile::enable(a.profile);
  return bench::run_reporting_errors("bench_clip_vision", [&] { return run(a); });
}
