// bench_int8_gemm: the CPU linear layer's rate per weight format on one
// machine, side by side in one run: float32 and bfloat16 (packed) through
// ops::linear, and W8A8 int8 (ops/cpu/int8_matmul.h: the activation's
// per-row quantization included). Shapes: Wan-1.3B's GEMMs at CFG batch 2,
// 17 x 256 x 256 (M = 2560 tokens; K x N = 1536 x 1536, 1536 x 8960,
// 8960 x 1536), DiT-XL/2's at batch 2 (M = 512; 1152 x 4608, 4608 x 1152).
// Prints the median of --repeat timings per format and the ratio to
// bfloat16.
//
//   bench_int8_gemm [--repeat 7] [--threads 2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"
#include "ops/backend.h"
#include "ops/cpu/int8_matmul.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

using namespace ditgen;

namespace {

double seconds_of(const std::function<void()>& f, int repeat) {
  f();  // warm-up: primitive creation, scratch sizing
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return bench::median(t);
}

Tensor random(Shape s, uint32_t seed, float scale) {
  Tensor t = Tensor::empty(std::move(s));
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = scale * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 7, threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else if (k == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_int8_gemm [--repeat 7] [--threads 2]\n");
      return 2;
    }
  }
  ops::set_num_threads(threads);
  struct Shape3 {
    const char* what;
    int64_t m, k, n;
  };
  const Shape3 shapes[] = {{"wan1.3b qkvo", 2560, 1536, 1536},
                           {"wan1.3b ffn in", 2560, 1536, 8960},
                           {"wan1.3b ffn out", 2560, 8960, 1536},
                           {"dit-xl mlp in", 512, 1152, 4608},
                           {"dit-xl mlp out", 512, 4608, 1152}};
  std::printf("%-16s %6s %6s %6s | %9s %9s %9s | %7s %7s | %s\n", "shape", "M", "K", "N", "f32 GF/s", "bf16 GF/s",
              "int8 GOP/s", "int8/bf16", "time", "int8 kernel");
  for (const Shape3& s : shapes) {
    const Tensor x = random({s.m, s.k}, 1, 2.0f);
    const Tensor w = random({s.n, s.k}, 2, 0.05f);
    const Tensor bias = random({s.n}, 3, 0.1f);
    const Tensor w_bf16 = ops::pack_gemm_weight(w.to(DType::kBF16));
    // int8: per-channel quantized and packed, as a load would.
    std::vector<int8_t> wq(static_cast<size_t>(s.n * s.k));
    std::vector<float> ws(static_cast<size_t>(s.n));
    ops::cpu::quantize_rows_s8(w.data(), s.n, s.k, s.k, wq.data(), ws.data());
    std::vector<uint8_t> packed(ops::cpu::packed_weight_bytes_s8(s.n, s.k));
    ops::cpu::pack_weight_s8(s.n, s.k, wq.data(), ws.data(), packed.data());
    Tensor y = Tensor::empty({s.m, s.n});
    const double flops = 2.0 * static_cast<double>(s.m) * s.n * s.k;
    const double t32 = seconds_of([&] { ops::linear(x, w, &bias); }, repeat);
    const double t16 = seconds_of([&] { ops::linear(x, w_bf16, &bias); }, repeat);
    const double t8 = seconds_of(
        [&] {
          ops::cpu::int8_linear(x.data(), s.m, s.k, s.k, packed.data(), s.n, bias.data(), ops::Activation::kNone,
                                y.data(), s.n);
        },
        repeat);
    std::printf("%-16s %6lld %6lld %6lld | %9.1f %9.1f %9.1f | %7.2f %6.1fms | %s\n", s.what,
                static_cast<long long>(s.m), static_cast<long long>(s.k), static_cast<long long>(s.n), flops / t32 / 1e9,
                flops / t16 / 1e9, flops / t8 / 1e9, t8 / t16, t8 * 1e3, ops::cpu::int8_kernel_name(s.m, s.n, s.k));
  }
  return 0;
}
