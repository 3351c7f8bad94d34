#include "pab/change_recorder.h"

#include <cmath>
#include <cstdio>

namespace ditgen::pab {

void ChangeRecorder::begin_step(int step, double t) {
  if (step == 0) {
    ++generation_;
    previous_.clear();
  }
  step_ = step;
  t_ = t;
}

void ChangeRecorder::record(int block, Kind kind, const Tensor& device_output, int part) {
  // The analysis reads elements on the host: a CUDA output is copied down
  // (a --pab-analyze run measures, it is not the fast path).
  const Tensor output = device_output.to(Device::kCPU, DType::kF32);
  const auto key = std::make_tuple(block, static_cast<int>(kind), part);
  auto it = previous_.find(key);
  if (it != previous_.end() && it->second.numel() == output.numel()) {
    double diff = 0, norm = 0;
    const float* a = output.data();
    const float* b = it->second.data();
    for (int64_t i = 0; i < output.numel(); ++i) {
      const double d = static_cast<double>(a[i]) - b[i];
      diff += d * d;
      norm += static_cast<double>(b[i]) * b[i];
    }
    rows_.push_back({generation_, step_, t_, block, part, kind, norm > 0 ? std::sqrt(diff / norm) : 0.0});
  }
  previous_[key] = output.clone();
}

std::string ChangeRecorder::csv() const {
  std::string out = "generation,step,timestep,block,part,kind,rel_change\n";
  char line[160];
  for (const Row& r : rows_) {
    std::snprintf(line, sizeof line, "%d,%d,%g,%d,%d,%s,%.6g\n", r.generation, r.step, r.t, r.block, r.part,
                  kind_name(r.kind), r.rel_change);
    out += line;
  }
  return out;
}

std::vector<std::pair<Kind, std::vector<std::pair<int, double>>>> ChangeRecorder::mean_by_kind() const {
  std::map<int, std::map<int, std::pair<double, int>>> acc;  // kind -> step -> (sum, n)
  for (const Row& r : rows_) {
    if (r.generation != 0) continue;
    auto& cell = acc[static_cast<int>(r.kind)][r.step];
    cell.first += r.rel_change;
    cell.second += 1;
  }
  std::vector<std::pair<Kind, std::vector<std::pair<int, double>>>> out;
  for (const auto& [kind, steps] : acc) {
    std::vector<std::pair<int, double>> series;
    for (const auto& [step, cell] : steps) series.emplace_back(step, cell.first / cell.second);
    out.emplace_back(static_cast<Kind>(kind), std::move(series));
  }
  return out;
}

}  // namespace ditgen::pab
