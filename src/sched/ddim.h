// DDIM (Song et al. 2020) with eta = 0, exactly as diffusers' DDIMScheduler
// (scheduling_ddim.py) as DiTPipeline drives it: no variance noise, no
// use_clipped_model_output.
//
// Subtleties kept from diffusers:
//  - the previous timestep is always t - T // n (T = num_train_timesteps),
//    whatever the timestep_spacing, and below 0 it is final_alpha_cumprod
//    (1 with set_alpha_to_one, else alphas_cumprod[0]);
//  - clip_sample clamps only the predicted x0; epsilon is not re-derived;
//  - coefficients are float32 scalars (torch 0-dim tensors), applied with
//    one rounding per torch op.
// A CogVideoXDDIMScheduler config (CogVideoX's own) runs that class's form
// of the same sampler: its float64 schedule with the SNR shift and zero
// terminal SNR, and its a_t / b_t update (cogvideox_ddim.h).
#pragma once
#include <vector>

#include "sched/diffusion_scheduler.h"

namespace ditgen::sched {

// DDIMScheduler.set_timesteps' timesteps, first (noisiest) to last:
// "linspace", "leading" (+ steps_offset) or "trailing" spacing of n steps
// over T train timesteps (CogVideoXDDIMScheduler's are the same).
std::vector<int64_t> ddim_timesteps(const std::string& spacing, int64_t T, int n, int64_t steps_offset);

class DdimScheduler final : public DiffusionScheduler {
 public:
  // DDIMScheduler's form, or CogVideoXDDIMScheduler's for a config of that class.
  explicit DdimScheduler(const SchedulerConfig& config);

  void set_timesteps(int num_inference_steps) override;
  void step(const Tensor& model_output, int step_index, Tensor& sample) override;
  Sampler sampler() const override { return Sampler::kDdim; }

 private:
  // The schedule made once: CogVideoX's alphas (empty: DDIMScheduler's form).
  DdimScheduler(const SchedulerConfig& config, std::vector<double> cogvideox_alphas);

  struct Coef {  // float32, as torch computes them
    float sqrt_alpha;       // alpha_prod_t ** 0.5
    float sqrt_beta;        // (1 - alpha_prod_t) ** 0.5
    float sqrt_alpha_prev;  // alpha_prod_t_prev ** 0.5
    float direction;        // (1 - alpha_prod_t_prev) ** 0.5
    float a_t = 0, b_t = 0;  // CogVideoX's form: sample and x0 weights
  };

  std::vector<double> cogvideox_alphas_;  // CogVideoX's float64 alphas_cumprod; empty: DDIMScheduler's form
  double final_alpha_cumprod_;
  int64_t steps_offset_;
  std::string spacing_;
  bool clip_sample_;
  float clip_range_;
  std::vector<Coef> coef_;  // one per step
};

}  // namespace ditgen::sched
