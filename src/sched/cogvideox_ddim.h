// CogVideoX's DDIM (eta = 0), exactly as diffusers 0.42.1's
// CogVideoXDDIMScheduler (scheduling_ddim_cogvideox.py), the scheduler
// CogVideoX-2b and -5b ship. It differs from DDIMScheduler (ddim.h) in
// three ways, all kept:
//  - its noise schedule is float64: scaled_linear betas are
//    torch.linspace(sqrt(beta_start), sqrt(beta_end), T, float64) ** 2, and
//    alphas_cumprod stays float64 through the SNR shift
//    a / (snr_shift_scale + (1 - snr_shift_scale) * a) ("following SD3")
//    and, with rescale_betas_zero_snr, the zero-terminal-SNR rescale of
//    sqrt(alphas_cumprod) (Lin et al. 2023, Algorithm 1; the last
//    timestep's alpha becomes 0: pure noise);
//  - its update is prev = a_t * sample + b_t * x0 with
//    a_t = ((1 - a_prev) / (1 - a)) ** 0.5, b_t = a_prev ** 0.5 - a ** 0.5 * a_t
//    (the same DDIM step, rounded differently);
//  - no clip_sample or thresholding.
// Each coefficient is a float64 0-dim tensor that torch rounds to float32
// when it multiplies the float32 sample, and every product and sum is
// rounded on its own, so the step is computed the same way here (the file
// is built without fused multiply-adds). The timesteps are DDIM's
// (ddim_timesteps); the previous timestep is t - T // n, below 0 the final
// alpha (1 with set_alpha_to_one, else alphas_cumprod[0]).
#pragma once
#include <string>
#include <vector>

#include "sched/ddim.h"
#include "sched/diffusion_scheduler.h"
#include "sched/scheduler_config.h"

namespace ditgen::sched {

class CogVideoXDdimScheduler final : public Scheduler {
 public:
  // Reads the config as CogVideoXDDIMScheduler.__init__; scaled_linear is
  // the one beta_schedule ditgen reproduces here (the published models'),
  // others and trained_betas are "not supported yet".
  explicit CogVideoXDdimScheduler(const SchedulerConfig& config);

  void set_timesteps(int num_inference_steps) override;
  void step(const Tensor& model_output, int step_index, Tensor& sample) override;
  std::string name() const override { return "ddim"; }
  SchedulerKind kind() const override { return SchedulerKind::kDiffusion; }

  const std::vector<double>& alphas_cumprod() const { return alphas_cumprod_; }

 private:
  struct Coef {  // float64 as computed, rounded to float32 where torch applies them
    float sqrt_alpha;  // alpha_prod_t ** 0.5
    float sqrt_beta;   // (1 - alpha_prod_t) ** 0.5
    float a_t, b_t;
  };

  std::string path_;
  int64_t num_train_timesteps_ = 1000;
  std::vector<double> alphas_cumprod_;  // T
  double final_alpha_cumprod_ = 1.0;
  int64_t steps_offset_ = 0;
  std::string spacing_;
  Prediction prediction_ = Prediction::kEpsilon;
  std::vector<Coef> coef_;  // one per step
};

}  // namespace ditgen::sched
