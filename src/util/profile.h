// Per-op wall-time accounting for benchmarks (`DITGEN_PROFILE=1`, or
// profile::enable()); on CUDA each timer synchronises the device (set_sync). A ScopedTimer costs one branch when profiling is off.
// Timers are taken on the calling thread only (ops parallelise inside), so the
// totals add up to the forward's wall time.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ditgen::profile {

bool enabled();
void enable(bool on = true);
// Called at each timer's start and end while profiling (the CLI installs
// cuda::synchronize on a CUDA run: ops there are asynchronous, and without
// it each timer would measure a kernel launch, not the kernel).
void set_sync(void (*sync)());
void sync();
void add(const char* name, double seconds);
void reset();
// (name, total seconds, calls), largest first.
std::vector<std::pair<std::string, std::pair<double, long>>> totals();
std::string report();  // a small table

class ScopedTimer {
 public:
  explicit ScopedTimer(const char* name) : name_(enabled() ? name : nullptr) {
    if (name_) {
      sync();
      start_ = std::chrono::steady_clock::now();
    }
  }
  ~ScopedTimer() {
    if (name_) sync();
    if (name_) add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ditgen::profile
