// What CogVideoX's DDIM (diffusers 0.42.1's CogVideoXDDIMScheduler,
// scheduling_ddim_cogvideox.py, the scheduler CogVideoX-2b and -5b ship)
// does differently from DDIMScheduler; DdimScheduler (ddim.h) runs it when
// the model's scheduler config is of that class:
//  - its noise schedule is float64: scaled_linear betas are
//    torch.linspace(sqrt(beta_start), sqrt(beta_end), T, float64) ** 2, and
//    alphas_cumprod stays float64 through the SNR shift
//    a / (snr_shift_scale + (1 - snr_shift_scale) * a) ("following SD3")
//    and, with rescale_betas_zero_snr, the zero-terminal-SNR rescale of
//    sqrt(alphas_cumprod) (Lin et al. 2023, Algorithm 1; the last
//    timestep's alpha becomes 0: pure noise);
//  - its update is prev = a_t * sample + b_t * x0 with
//    a_t = ((1 - a_prev) / (1 - a)) ** 0.5, b_t = a_prev ** 0.5 - a ** 0.5 * a_t
//    (the same DDIM step, rounded differently), with no clip_sample.
// Each coefficient is a float64 0-dim tensor that torch rounds to float32
// when it multiplies the float32 sample, and every product and sum is
// rounded on its own: the update is built without fused multiply-adds.
#pragma once
#include <cstdint>
#include <vector>

#include "sched/diffusion_scheduler.h"
#include "sched/scheduler_config.h"

namespace ditgen::sched {

// CogVideoXDDIMScheduler.__init__'s alphas_cumprod (T values, float64).
// scaled_linear is the one beta_schedule reproduced (the published
// models'); others and trained_betas are "not supported yet"; a
// snr_shift_scale <= 0 is a ConfigError naming it.
std::vector<double> cogvideox_alphas_cumprod(const SchedulerConfig& config);

// One update of n elements in place: x0 from the prediction `pred` (with
// sqrt_alpha = a ** 0.5, sqrt_beta = (1 - a) ** 0.5), then
// sample = a_t * sample + b_t * x0, every operation rounded to float32.
void cogvideox_ddim_update(const float* model_output, float* sample, int64_t n, Prediction pred, float sqrt_alpha,
                           float sqrt_beta, float a_t, float b_t);

}  // namespace ditgen::sched
