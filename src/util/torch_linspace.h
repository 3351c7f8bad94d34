// torch.linspace(start, end, steps, dtype=float32) on the CPU, bit for bit:
// torch computes start + step * i for the first half and end - step *
// (steps - 1 - i) for the rest, with step = (end - start) / (steps - 1) in
// float32, and its build contracts both into fused multiply-adds
// (reproduced with fmaf). The schedulers' beta schedules and CogVideoX's
// rotary grids are made with it.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace ditgen {

inline std::vector<float> torch_linspace_f32(double start_d, double end_d, int64_t steps) {
  std::vector<float> out(steps > 0 ? static_cast<size_t>(steps) : 0);
  if (steps <= 0) return out;
  const float start = static_cast<float>(start_d);
  const float end = static_cast<float>(end_d);
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    out[static_cast<size_t>(i)] = i < halfway ? std::fmaf(step, static_cast<float>(i), start)
                                              : std::fmaf(-step, static_cast<float>(steps - i - 1), end);
  }
  return out;
}

}  // namespace ditgen
