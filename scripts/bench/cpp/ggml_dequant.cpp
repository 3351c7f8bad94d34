// bench_ggml_dequant: dequantization throughput of ggml's block formats
// (io::dequantize, the per-block code of kernels/math/ggml_blocks.h) on this
// machine, in GB/s of float32 written, on 1 and 2 OpenMP threads (or the
// counts given with --threads):
//
//   stream  a whole 4096 x 4096 weight (64 MiB of float32 out, beyond the
//           caches: what loading a quantized checkpoint costs per tensor);
//   tile    16 rows of 4096 (256 KiB out, L2-resident, rewritten in place:
//           the decode alone, as a GEMM dequantizing weight tiles sees it).
//
// A first line per thread count, "fill", writes the same 64 MiB with
// std::fill: this machine's write bandwidth, the ceiling of "stream".
//
// The blocks are random bytes with finite float16 scales (every code path of
// a decoder runs; the time does not depend on the values). Each figure is
// the median and the best of --reps runs after one warm-up (on a machine
// shared with other work, the best is the code's own speed).
//
//   <build>/scripts/bench/cpp/bench_ggml_dequant [--types q8_0,q4_k] [--threads 1,2] [--reps 15]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "io/ggml_quants.h"
#include "tensor/half.h"

using namespace ditgen;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

// Random blocks of `type`, each float16 scale field set to a small finite value.
std::vector<uint8_t> random_blocks(io::GgmlType type, int64_t elements) {
  const math::GgmlTypeTraits& t = math::ggml_traits(type);
  const int64_t blocks = elements / t.block_size;
  std::vector<uint8_t> data(static_cast<size_t>(blocks * t.type_size));
  std::mt19937 rng(44);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::vector<int> scale_offsets;
  switch (type) {
    case io::GgmlType::kQ2_K: scale_offsets = {80, 82}; break;
    case io::GgmlType::kQ3_K: scale_offsets = {108}; break;
    case io::GgmlType::kQ6_K: scale_offsets = {208}; break;
    case io::GgmlType::kQ4_1: case io::GgmlType::kQ5_1: case io::GgmlType::kQ4_K: case io::GgmlType::kQ5_K:
      scale_offsets = {0, 2};
      break;
    default: scale_offsets = {0}; break;  // Q8_0, Q4_0, Q5_0; F16 / BF16 elements are their own values
  }
  std::normal_distribution<float> normal(0.0f, 0.01f);
  if (t.block_size > 1)
    for (int64_t b = 0; b < blocks; ++b)
      for (int off : scale_offsets) {
        const uint16_t h = f32_to_f16(normal(rng));
        std::memcpy(&data[static_cast<size_t>(b * t.type_size + off)], &h, 2);
      }
  return data;
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_ggml_dequant [--types q8_0,q4_k] [--threads 1,2] [--reps 15]\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string types = "q8_0,q4_k", threads = "1,2";
  int reps = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--types") types = bench::option_value(argc, argv, i, usage);
    else if (a == "--threads") threads = bench::option_value(argc, argv, i, usage);
    else if (a == "--reps") reps = std::atoi(bench::option_value(argc, argv, i, usage).c_str());
    else if (a == "--help") usage(0);
    else usage(2);
  }
  constexpr int64_t kCols = 4096, kRows = 4096, kTileRows = 16;
  std::printf("cpu: %s\n", cpu_model().c_str());
  std::printf("%-6s %-7s %-6s %22s %22s\n", "type", "threads", "mode", "GB/s f32 out (med/best)",
              "GB/s blocks in (best)");
  std::vector<float> out(static_cast<size_t>(kRows * kCols));
  for (const std::string& t : split(threads)) {
    omp_set_num_threads(std::atoi(t.c_str()));
    const int64_t n = kRows * kCols, chunk = n / 64;
    auto fill = [&] {
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < 64; ++c) std::fill(out.begin() + c * chunk, out.begin() + (c + 1) * chunk, 1.0f);
    };
    fill();
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) times.push_back(seconds(fill));
    std::printf("%-6s %-7s %-6s %11.2f / %8.2f\n", "fill", t.c_str(), "stream", n * 4.0 / bench::median(times) / 1e9,
                n * 4.0 / *std::min_element(times.begin(), times.end()) / 1e9);
  }
  for (const std::string& name : split(types)) {
    io::GgmlType type;
    if (!io::parse_ggml_type(name, type) || !math::ggml_traits(type).dequantized) {
      std::fprintf(stderr, "bench_ggml_dequant: '%s' is not a type ditgen dequantizes\n", name.c_str());
      return 2;
    }
    const std::vector<uint8_t> data = random_blocks(type, kRows * kCols);
    const double in_per_element = static_cast<double>(data.size()) / static_cast<double>(kRows * kCols);
    for (const std::string& t : split(threads)) {
      omp_set_num_threads(std::atoi(t.c_str()));
      for (const char* mode : {"stream", "tile"}) {
        const bool tile = std::strcmp(mode, "tile") == 0;
        const int64_t elements = tile ? kTileRows * kCols : kRows * kCols;
        const int inner = tile ? 64 : 1;  // a tile is short: time 64 back to back
        auto run = [&] {
          for (int k = 0; k < inner; ++k) {
            // A tile: a different row band each time, into the same L2-resident buffer.
            const int64_t first = tile ? ((k * kTileRows) % kRows) * kCols : 0;
            io::dequantize(type, data.data(), first, elements, out.data());
          }
        };
        run();  // warm-up: pages touched, threads started
        std::vector<double> times;
        for (int r = 0; r < reps; ++r) times.push_back(seconds(run) / inner);
        const double med = bench::median(times), best = *std::min_element(times.begin(), times.end());
        std::printf("%-6s %-7s %-6s %11.2f / %8.2f %22.2f\n", name.c_str(), t.c_str(), mode, elements * 4.0 / med / 1e9,
                    elements * 4.0 / best / 1e9, elements * in_per_element / best / 1e9);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
