// See rate_probe.h.
#include "cli/rate_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "ops/ops.h"

namespace ditgen::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Repeats `once` for at least `seconds` after one untimed call (oneDNN
// makes its kernel on the first); returns the calls per second.
template <class F>
double calls_per_second(double seconds, F once) {
  once();
  const auto start = Clock::now();
  int64_t calls = 0;
  do {
    once();
    ++calls;
  } while (since(start) < seconds);
  return static_cast<double>(calls) / since(start);
}

// x (m, k) and w (n, k) in `weights`, packed as a run's GEMM weights are.
std::pair<Tensor, Tensor> gemm_operands(int64_t m, int64_t n, int64_t k, DType weights) {
  Tensor x = Tensor::empty({m, k});
  Tensor w32 = Tensor::empty({n, k});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>((i * 7919) % 101) / 101.0f - 0.5f;
  for (int64_t i = 0; i < w32.numel(); ++i) w32[i] = static_cast<float>((i * 104729) % 97) / 97.0f - 0.5f;
  return {x, ops::pack_gemm_weight(ops::convert(w32, weights))};
}

}  // namespace

void warm_up_compute(int64_t width, DType weights, int threads) {
  const int before = ops::num_threads();
  ops::set_num_threads(std::max(1, threads));
  const int64_t k = std::clamp<int64_t>(width, 16, 4096);
  const auto [x, w] = gemm_operands(64, k, k, weights);
  (void)ops::linear(x, w, nullptr);
  ops::set_num_threads(before);
}

MachineRates measure_rates(int64_t rows, int64_t width, int64_t inner, DType weights, int threads) {
  const auto start = Clock::now();
  MachineRates r;
  r.threads = std::max(1, threads);
  const int before = ops::num_threads();
  ops::set_num_threads(r.threads);

  const int64_t m = std::clamp<int64_t>(rows, 16, 2048), k = std::clamp<int64_t>(width, 16, 4096), n = std::clamp<int64_t>(inner, 16, 2048);
  const auto [x, w] = gemm_operands(m, n, k, weights);
  const double gemms = calls_per_second(0.6, [&] { (void)ops::linear(x, w, nullptr); });
  r.flops_per_second = gemms * 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);

  // Each thread copies its share of 64 MiB, beyond the caches.
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> from(kBytes, 1), to(kBytes, 0);
  const size_t share = kBytes / static_cast<size_t>(r.threads);
  const double copies = calls_per_second(0.3, [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < r.threads; ++t)
      pool.emplace_back([&, t] {
        std::memcpy(to.data() + static_cast<size_t>(t) * share, from.data() + static_cast<size_t>(t) * share, share);
      });
    for (std::thread& th : pool) th.join();
  });
  r.bytes_per_second = copies * 2.0 * static_cast<double>(share) * static_cast<double>(r.threads);

  ops::set_num_threads(before);
  r.seconds = since(start);
  return r;
}

}  // namespace ditgen::cli
