// DPM-Solver++(2M) (Lu et al. 2022), exactly as diffusers'
// DPMSolverMultistepScheduler with solver_order=2 and algorithm_type
// dpmsolver++ (deis is an alias diffusers maps to it), built by from_config
// from any scheduler config: DPM's own defaults apply to absent keys
// (timestep_spacing "linspace", final_sigmas_type "zero", lower_order_final
// true, euler_at_final false, lambda_min_clipped -inf, solver_type midpoint;
// logrho/bh1/bh2 are aliases of midpoint).
//
// Precision, as diffusers: sigmas = sqrt((1 - ac) / ac) in float32 (torch),
// looked up at integer timesteps (np.interp is exact there) and kept float32;
// alpha_t, sigma_t, lambda, h and every coefficient are float32 0-dim
// tensors; only set_timesteps' spacing arithmetic is float64 (numpy).
//
// The step keeps one buffer: the previous step's x0 prediction (the
// multistep history), updated in place element by element.
#pragma once
#include <vector>

#include "sched/diffusion_scheduler.h"

namespace ditgen::sched {

class DpmSolverPP2MScheduler final : public DiffusionScheduler {
 public:
  explicit DpmSolverPP2MScheduler(const SchedulerConfig& config);

  void set_timesteps(int num_inference_steps) override;
  void step(const Tensor& model_output, int step_index, Tensor& sample) override;
  Sampler sampler() const override { return Sampler::kDpmpp2m; }
  // sigmas[i] for step i, plus the final sigma (0 or sigma_min): n + 1 values.
  const std::vector<float>& sigmas() const { return sigmas_; }

 private:
  enum class Spacing { kLinspace, kLeading, kTrailing };
  struct Coef {  // float32, as torch computes them
    int order;         // 1 or 2
    float alpha_s0;    // convert_model_output at sigma_s0
    float sigma_s0;
    float c_sample;    // sigma_t / sigma_s0
    float c_d0;        // alpha_t * (exp(-h) - 1)
    float c_d1;        // 2nd order, added: -(0.5 * c_d0) (midpoint), alpha_t * ((exp(-h)-1)/h + 1) (heun)
    float inv_r0;      // 1 / r0, r0 = h_0 / h
  };

  bool heun_;
  bool lower_order_final_;
  bool euler_at_final_;
  bool final_sigma_min_;
  double lambda_min_clipped_;
  Spacing spacing_;
  int64_t steps_offset_;

  std::vector<float> sigmas_;
  std::vector<Coef> coef_;
  Tensor prev_x0_;      // x0 prediction of the previous step
  int next_step_ = -1;  // the step_index expected next (-1: only 0)
};

}  // namespace ditgen::sched
