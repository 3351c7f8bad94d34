// The Euler sampler of flow matching, exactly as diffusers'
// FlowMatchEulerDiscreteScheduler (use_dynamic_shifting false, no karras /
// exponential / beta sigmas, no invert_sigmas, no stochastic sampling): the
// sample moves along the predicted velocity, x <- x + (sigma_next - sigma) * v.
//
// Schedule, with diffusers' two precisions and its two shifts:
//  - at construction (torch, float32): sigma_max and sigma_min are the
//    shifted sigmas of train timesteps T and 1, s -> shift*s / (1 + (shift-1)*s)
//    with shift rounded to float32 (1 and shift/T for shift 1);
//  - set_timesteps (numpy, float64): linspace(sigma_max * T, sigma_min * T, n)
//    / T, shifted again (so the last sigma is shifted twice, e.g. 0.00893 for
//    shift 3 where once would give 0.00299), rounded to float32; the
//    timesteps are those float32 sigmas * T in float32 (not integers: what
//    WanPipeline feeds the transformer), and a final sigma 0 is appended.
// The step is float32: dt = sigma_next - sigma, then sample + dt * v.
#pragma once
#include <optional>
#include <vector>

#include "sched/flow_scheduler.h"

namespace ditgen::sched {

class FlowMatchEulerScheduler final : public FlowScheduler {
 public:
  // shift_override: generate.shift, replacing the config's shift.
  FlowMatchEulerScheduler(const SchedulerConfig& config, std::optional<double> shift_override);

  void set_timesteps(int num_inference_steps) override;
  void step(const Tensor& model_output, int step_index, Tensor& sample) override;
  Sampler sampler() const override { return Sampler::kEuler; }

 private:
  double sigma_max_, sigma_min_;  // float32 values, from the constructor's schedule
};

}  // namespace ditgen::sched
