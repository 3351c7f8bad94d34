// bench_forward: times one transformer forward of any registered family
// (DiT, PixArt, Latte, Wan, CogVideoX), or a large square GEMM through the
// CPU's GEMM op (this machine's float32 or bfloat16 peak). A benchmark, not
// a test; driven by scripts/bench/bench_dit_forward.py, bench_cpu.py,
// bench_video_models.py and bench_quantized.py, which compare it with PyTorch.
//
//   bench_forward --model DIR [--batch 2] [--frames 16] [--latent-size N] [--text-tokens 120]
//                 [--repeat 5] [--warmup 1] [--threads 2] [--profile]
//                 [--device cpu|cuda] [--dtype float32|bfloat16|float16] [--attention auto|flash|math]
//                 [--transformer-file FILE] [--quantize none|int8] [--save-output FILE.safetensors]
//                 [--cpu-attention auto|tiles|matmul] [--first-frame-clean]
//   bench_forward --text-encoder DIR [--batch 1] [--text-tokens 120] [--pack-weights] [--dtype ...] ...
//   bench_forward --sgemm [N] [--dtype float32|bfloat16] [--repeat 5] [--warmup 1] [--threads 2]
//
// --text-encoder times the text encoder of DIR (a model root with
// text_encoder/, or that directory) on --batch prompts of --text-tokens
// token ids (id i of a prompt is (7919 i + 1) mod the vocabulary; all real,
// no padding): the encode stage's forward alone, the weights loaded once,
// row-major as the pipeline keeps them (pipeline/text_encoding.h), or
// packed as a transformer's are with --pack-weights (load_seconds then
// includes the packing).
//
// DIR is a diffusers model root (model_index.json + transformer/) or the
// transformer directory itself. The input is a deterministic random latent
// ~ N(0, 1) of the model's sample size (or --latent-size; video families:
// --frames frames, default the config's), timesteps 500, and the
// conditioning of a CFG batch: class labels alternating 207 and the null
// class, or random text embeddings (--text-tokens rows of the model's
// caption_channels, ~ N(0, 1), all rows seen; PixArt's 1024 models get the
// micro-conditions of the latent's size). Output is one `key value` line
// per figure:
//
//   forward_seconds <median>   forward_all <t1,t2,...>   peak_rss_bytes <n>
//   device_peak_bytes <n>      (CUDA: the caching allocator's peak in use)
//
// --first-frame-clean gives a video model a timestep per token, 0 on the
// first latent frame's tokens and 500 elsewhere (Wan 2.2 TI2V's
// expand_timesteps, ForwardArgs::token_timesteps).
//
// --transformer-file runs the transformer from one weights file (GGUF in
// any block type, safetensors, fp8), opened with the family's single-file
// naming as the pipeline opens model.transformer; DIR still gives the
// config. --quantize int8 is model.quantize "int8" (W8A8 block matrices,
// models/placement.h). --save-output writes the first forward's prediction
// ("output") with its inputs ("latents", and "text" for text-conditioned
// families), float32, so a script can compare variants (relative L2) and
// feed a reference implementation the same inputs.
//
// On CUDA the timed forward includes uploading the latents and downloading
// the prediction (what the pipeline does every step); scripts/bench/bench_cuda.sh
// runs the CUDA variants next to the CPU one on the same machine.
//   sgemm_gflops <median>      sgemm_all <g1,g2,...>
//
// --cpu-attention picks the CPU's bfloat16 attention kernel (the test hook
// ops::cpu::Bf16Hooks::attention): auto, the tile kernel, or oneDNN's
// matmuls, so that one machine times both.
//
// With --profile the per-op table of util/profile.h (summed over the timed
// repeats, not the warmup) follows a `profile_begin` line up to `profile_end`.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "config/device_choice.h"
#include "models/registry.h"
#include "models/transformer.h"
#include "ops/backend.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

using namespace ditgen;
using bench::median;

namespace {

struct Args {
  std::string model, text_encoder;
  std::string transformer_file, save_output;  // optional: a single weights file; where to save the output
  bool int8 = false;                           // --quantize int8
  int64_t sgemm_n = 0;  // > 0: sgemm mode
  int64_t batch = 0, frames = 0, latent_size = 0, text_tokens = 120;  // 0: the mode's / model's default
  int repeat = 5, warmup = 1, threads = 2;
  bool profile = false, pack_weights = false, first_frame_clean = false;
  std::string device = "cpu", dtype = "float32", attention = "auto", cpu_attention = "auto";
};

[[noreturn]] void usage(int code);

// --dtype as the config's model.dtype names it.
DTypeChoice dtype_choice(const std::string& name) {
  const auto choice = value_in(kDTypeChoiceNames, name);
  if (!choice) usage(2);
  return *choice;
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_forward --model DIR [--batch 2] [--frames F] [--latent-size N] [--text-tokens 120]\n"
               "         [--repeat 5] [--warmup 1] [--threads 2] [--profile]\n"
               "         [--device cpu|cuda] [--dtype float32|bfloat16|float16] [--attention auto|flash|math]\n"
               "         [--transformer-file FILE] [--quantize none|int8] [--save-output FILE.safetensors]\n"
               "         [--cpu-attention auto|tiles|matmul] [--first-frame-clean]\n"
               "       bench_forward --text-encoder DIR [--batch 1] [--text-tokens 120] [--pack-weights] [--dtype D] ...\n"
               "       bench_forward --sgemm [N=4096] [--dtype float32|bfloat16] [--repeat 5] [--warmup 1]\n"
               "         [--threads 2]\n");
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--model") a.model = value();
    else if (k == "--text-encoder") a.text_encoder = value();
    else if (k == "--sgemm") a.sgemm_n = (i + 1 < argc && argv[i + 1][0] != '-') ? std::stoll(value()) : 4096;
    else if (k == "--batch") a.batch = std::stoll(value());
    else if (k == "--frames") a.frames = std::stoll(value());
    else if (k == "--latent-size") a.latent_size = std::stoll(value());
    else if (k == "--text-tokens") a.text_tokens = std::stoll(value());
    else if (k == "--repeat") a.repeat = std::stoi(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--profile") a.profile = true;
    else if (k == "--first-frame-clean") a.first_frame_clean = true;
    else if (k == "--pack-weights") a.pack_weights = true;
    else if (k == "--device") a.device = value();
    else if (k == "--dtype") a.dtype = value();
    else if (k == "--attention") a.attention = value();
    else if (k == "--transformer-file") a.transformer_file = value();
    else if (k == "--save-output") a.save_output = value();
    else if (k == "--quantize") {
      const std::string q = value();
      if (q != "none" && q != "int8") usage(2);
      a.int8 = q == "int8";
    }
    else if (k == "--cpu-attention") a.cpu_attention = value();
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  const int modes = !a.model.empty() + !a.text_encoder.empty() + (a.sgemm_n > 0);
  if (a.batch == 0) a.batch = a.text_encoder.empty() ? 2 : 1;  // a CFG pair of latents, one prompt
  const bool forward_only = !a.transformer_file.empty() || a.int8 || !a.save_output.empty();
  if (modes != 1 || (forward_only && a.model.empty()) || a.batch < 1 || a.repeat < 1 || a.warmup < 0 || a.threads < 1 ||
      a.frames < 0 || a.latent_size < 0 || a.text_tokens < 1)
    usage(2);
  return a;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }


void print_list(const char* key, const std::vector<double>& v) {
  std::printf("%s ", key);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.4f", i ? "," : "", v[i]);
  std::printf("\n");
}

void fill_normal(float* p, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
}

// The CPU GEMM's peak in --dtype: float32, or bfloat16 (B a bfloat16
// weight [N, K], A float32 rounded inside the GEMM, as a model's linear).
int run_sgemm(const Args& a) {
  const int64_t n = a.sgemm_n;
  const DType dtype = a.dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  Tensor A = Tensor::empty({n, n}), B = Tensor::empty({n, n}), C = Tensor::empty({n, n});
  fill_normal(A.data(), n * n, 1);
  fill_normal(B.data(), n * n, 2);
  // The weight as a transformer's is placed: bfloat16 packed where the CPU
  // packs it (models/placement.h), so the peak is the best GEMM ditgen runs.
  const Tensor Bw = ops::pack_gemm_weight(B.to(dtype));
  std::vector<double> gflops;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    const double t0 = now();
    ops::cpu::gemm(false, true, n, n, n, 1.0f, A.data(), n, Bw.raw(), dtype, n, 0.0f, C.data(), n, nullptr,
                   ops::Activation::kNone, Bw.layout());
    const double dt = now() - t0;
    if (r >= a.warmup) gflops.push_back(2.0 * n * n * n / dt * 1e-9);
  }
  std::printf("sgemm_n %lld\nsgemm_dtype %s\nsgemm_weight %s\n", static_cast<long long>(n), dtype_name(dtype),
              Bw.layout() == Layout::kGemmPacked ? "packed" : "row-major");
  std::printf("sgemm_gflops %.2f\n", median(gflops));
  print_list("sgemm_all", gflops);
  return 0;
}

// Times `forward` over the warmup and repeats and prints the figures every
// mode reports (and the profile); returns the first forward's output.
template <class F>
Tensor time_forwards(const Args& a, Device device, F forward) {
  std::vector<double> times;
  double checksum = 0;
  Tensor first;
  for (int r = 0; r < a.warmup + a.repeat; ++r) {
    if (r == a.warmup && a.profile) profile::reset();
    const double t0 = now();
    Tensor y = forward();
    const double dt = now() - t0;
    if (r >= a.warmup) times.push_back(dt);
    if (r == 0) {
      for (int64_t i = 0; i < y.numel(); ++i) checksum += y[i];
      first = std::move(y);
    }
  }
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("output_sum %.6g\n", checksum);
  std::printf("forward_seconds %.4f\n", median(times));
  print_list("forward_all", times);
  std::printf("peak_rss_bytes %lld\n", static_cast<long long>(ru.ru_maxrss) * 1024);
  if (device == Device::kCUDA)
    std::printf("device_peak_bytes %lld\n", static_cast<long long>(ops::cuda_peak_bytes()));
  if (a.profile) {
    std::printf("profile_begin (summed over %d forwards)\n%sprofile_end\n", a.repeat, profile::report().c_str());
  }
  return first;
}

int run_text_encoder(const Args& a) {
  namespace fs = std::filesystem;
  fs::path dir(a.text_encoder);
  if (fs::exists(dir / "text_encoder" / "config.json")) dir /= "text_encoder";
  const std::string cfg_path = (dir / "config.json").string();
  const auto spec = models::text_encoder_spec(io::read_json_file(cfg_path), cfg_path);
  const DeviceChoice where = choose_device("cpu", dtype_choice(a.dtype), "auto", false, 0, ops::cpu_has_bf16());
  std::printf("family %s\nvariant %s\ndtype %s\n", spec->family(), spec->variant(), dtype_name(where.dtype));
  const double t_load = now();
  const auto encoder =
      spec->load(io::WeightStore::open_dir(dir.string()), {where.device, where.dtype, a.pack_weights});
  std::printf("load_seconds %.3f\n", now() - t_load);
  models::TokenBatch tokens;
  for (int64_t p = 0; p < a.batch; ++p) {
    std::vector<int64_t> ids(static_cast<size_t>(a.text_tokens));
    for (int64_t i = 0; i < a.text_tokens; ++i) ids[i] = (7919 * i + 1) % spec->vocab_size();
    tokens.ids.push_back(std::move(ids));
    tokens.lengths.push_back(a.text_tokens);
  }
  time_forwards(a, where.device, [&] { return encoder->encode(tokens); });
  return 0;
}

int run_forward(const Args& a) {
  namespace fs = std::filesystem;
  std::string dir = a.model, cfg_path;
  nlohmann::json cfg_json;
  if (fs::exists(fs::path(dir) / "model_index.json")) {
    const io::ModelDir md = io::ModelDir::open(dir);
    cfg_json = md.part_config("transformer");
    cfg_path = md.part_config_path("transformer");
    dir = md.part_dir("transformer");
  } else {
    cfg_path = (fs::path(dir) / "config.json").string();
    cfg_json = io::read_json_file(cfg_path);
  }
  const auto spec = models::transformer_spec(cfg_json, cfg_path);
  // The latent of one output: the model's sample size with a VAE factor of 1
  // (so pixels = latent positions), or --latent-size.
  const Shape one = spec->latent_shape(a.latent_size, a.latent_size, a.frames, {1}, "bench_forward");
  const double t_load = now();
  // The same rules as the ditgen command line (config/device_choice.h).
  const DeviceChoice where =
      choose_device(a.device, dtype_choice(a.dtype), a.attention, ops::cuda_built(), ops::cuda_device_count(),
                    ops::cpu_has_bf16());
  if (where.device == Device::kCUDA) {
    ops::bind_cuda_device(0);
    ops::set_attention_mode(ops::attention_mode_from_name(where.attention));
    if (a.profile) profile::set_sync(&ops::cuda_synchronize);
    std::printf("device %s\nattention_path %s\n", ops::cuda_device_description().c_str(),
                ops::cuda_attention_path(spec->head_dim(), where.dtype).c_str());
  }
  std::printf("family %s\ndtype %s\nquantize %s\n", spec->family(), dtype_name(where.dtype), a.int8 ? "int8" : "none");
  models::Placement place(where.device, where.dtype);
  place.int8 = a.int8;
  // As pipeline::ModelParts::weights opens model.transformer.
  const io::WeightStore weights = a.transformer_file.empty()
                                      ? io::WeightStore::open_dir(dir)
                                      : io::WeightStore::open_file(a.transformer_file, spec->single_file_options());
  const auto model = spec->load(weights, {}, place);
  std::printf("load_seconds %.3f\n", now() - t_load);

  const int64_t b = a.batch;
  Shape shape = one;
  shape.insert(shape.begin(), b);
  std::printf("latents %s\n", shape_str(shape).c_str());
  Tensor x = Tensor::empty(shape);
  fill_normal(x.data(), x.numel(), 0);
  models::ForwardArgs args;
  args.latents = &x;
  args.timesteps.assign(b, 500.0f);
  if (a.first_frame_clean) {  // per token: the first latent frame's clean (0), the rest at 500
    const parallel::Workload work = spec->workload(one);
    const int64_t per_frame = work.tokens, tokens = per_frame * std::max<int64_t>(work.frames, 1);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t t = 0; t < tokens; ++t) args.token_timesteps.push_back(t < per_frame ? 0.0f : 500.0f);
  }
  Tensor text;
  if (spec->conditioning() == models::Conditioning::kClassLabels) {
    const int64_t classes = spec->num_classes();
    for (int64_t i = 0; i < b; ++i) args.class_labels.push_back(i % 2 ? classes : 207 % classes);
  } else {
    text = Tensor::empty({b, a.text_tokens, spec->caption_channels()});
    fill_normal(text.data(), text.numel(), 1);
    args.text = &text;
    args.text_lengths.assign(b, static_cast<int32_t>(a.text_tokens));
    if (spec->micro_conditions())
      for (int64_t i = 0; i < b; ++i) {
        const auto h = static_cast<float>(one[one.size() - 2] * 8), w = static_cast<float>(one.back() * 8);
        args.resolution.push_back({h, w});
        args.aspect_ratio.push_back(h / w);
      }
  }

  const Tensor y = time_forwards(a, where.device, [&] { return model->forward(args); });
  if (!a.save_output.empty()) {
    std::vector<std::pair<std::string, Tensor>> saved = {{"output", y}, {"latents", x}};
    if (text.defined()) saved.emplace_back("text", text);
    io::write_safetensors(a.save_output, saved);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ops::set_num_threads(a.threads);
  ops::cpu::Bf16Hooks hooks;
  if (a.cpu_attention == "tiles") hooks.attention = ops::cpu::Bf16AttentionKernel::kTiles;
  else if (a.cpu_attention == "matmul") hooks.attention = ops::cpu::Bf16AttentionKernel::kMatmul;
  else if (a.cpu_attention != "auto") usage(2);
  ops::cpu::set_bf16_hooks(hooks);
  std::printf("cpu_attention %s\n", a.cpu_attention.c_str());
  profile::enable(a.profile);
  std::printf("threads %d\nblas_threading %s\nblas_core %s\n", a.threads, ops::blas_threading(),
              ops::blas_core());
  try {
    if (a.sgemm_n > 0) return run_sgemm(a);
    return a.text_encoder.empty() ? run_forward(a) : run_text_encoder(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_forward: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_forward: %s\n", e.what());
    return 1;
  }
}
