// The training noise schedule shared by DDIM and DPM-Solver: betas and
// alphas_cumprod, computed with the float32 rounding torch applies in
// diffusers' scheduler constructors, so timestep lookups return the very
// float32 values diffusers uses:
//   linear:          torch.linspace(beta_start, beta_end, T, float32). torch's
//                    CPU kernel computes start + step*i (first half) and
//                    end - step*(T-1-i) (second half) and its build contracts
//                    both into fused multiply-adds, reproduced with fmaf.
//   scaled_linear:   the same linspace of sqrt(beta_start), sqrt(beta_end)
//                    (sqrt in float64), squared in float32.
//   squaredcos_cap_v2: betas_for_alpha_bar in float64, rounded to float32.
//   trained_betas:   the list, rounded to float32 (wins over beta_schedule).
//   alphas = 1 - betas (float32); alphas_cumprod = torch.cumprod, which on
//   CPU accumulates in float64 and rounds each partial product to float32.
#pragma once
#include <vector>

#include "sched/scheduler_config.h"
#include "util/torch_linspace.h"  // torch_linspace_f32

namespace ditgen::sched {

struct TrainSchedule {
  int64_t num_train_timesteps = 1000;
  std::vector<float> betas;
  std::vector<float> alphas_cumprod;  // betas.size() entries
};

// Reads num_train_timesteps, beta_start, beta_end, beta_schedule,
// trained_betas and rescale_betas_zero_snr (true: not supported yet).
TrainSchedule make_train_schedule(const SchedulerConfig& config);


}  // namespace ditgen::sched
