// UniPC (Zhao et al. 2023) on flow sigmas, exactly as diffusers'
// UniPCMultistepScheduler runs for Wan (prediction_type flow_prediction,
// use_flow_sigmas true, solver_order 2, solver_type bh2, predict_x0 true,
// lower_order_final true, final_sigmas_type zero): the predictor UniP-2
// and the corrector UniC, with B(h) = expm1(-h).
//
// Schedule, as diffusers computes it in float64 (numpy): sigmas =
// linspace(1, 1/T, n + 1)[:-1], shifted s -> shift*s / (1 + (shift-1)*s), the
// first pulled to 1 - 1e-6 (log(1 - sigma) must stay finite); timesteps =
// int64(sigma * T), truncated; the sigmas then rounded to float32 with a final
// 0. Everything in the step is float32 as torch does it: alpha = 1 - sigma,
// lambda = log(alpha) - log(sigma), h, expm1, the corrector's 2x2 solve.
//
// Per step i, with x0_i = sample - sigma_i * model_output (the flow
// velocity's data prediction):
//  - UniC corrects the sample the previous predictor produced, with x0_i and
//    the history, unless step i-1 is in disable_corrector; its order is the
//    previous predictor's;
//  - UniP predicts the next sample, order min(2, i + 1, n - i) (first order at
//    the first step and, lower_order_final, at the last).
// The step keeps three buffers the size of a sample: x0 of the two previous
// steps and the sample before the last predictor, updated element by element.
#pragma once
#include <optional>
#include <vector>

#include "sched/flow_scheduler.h"

namespace ditgen::sched {

class UniPcFlowScheduler final : public FlowScheduler {
 public:
  // shift_override: generate.shift, replacing the config's flow_shift.
  UniPcFlowScheduler(const SchedulerConfig& config, std::optional<double> shift_override);

  void set_timesteps(int num_inference_steps) override;
  void step(const Tensor& model_output, int step_index, Tensor& sample) override;
  Sampler sampler() const override { return Sampler::kUnipc; }

 private:
  // Coefficients of one step, float32 as torch computes them. A predictor or
  // corrector update is x_ = c_sample * x - c_x0 * m0, then x_ - c_d * (...).
  struct Coef {
    float sigma;  // sigmas[i]: x0 = sample - sigma * model_output
    bool correct;
    int corrector_order;  // 1 or 2
    float c_sample_c, c_x0_c, c_d_c;
    float rk_c;           // order 2: (lambda_{i-2} - lambda_{i-1}) / h
    float rho0_c, rho1_c;  // rhos_c (order 1: rho1 = 0.5)
    int predictor_order;  // 1 or 2
    float c_sample_p, c_x0_p, c_d_p;
    float rk_p;  // order 2: (lambda_{i-1} - lambda_i) / h
  };

  std::vector<double> disable_corrector_;
  std::vector<Coef> coef_;
  Tensor prev_x0_;       // x0 of step i-1
  Tensor prev_prev_x0_;  // x0 of step i-2
  Tensor last_sample_;   // the sample step i-1's predictor started from
  int next_step_ = -1;   // the step_index expected next (-1: only 0)
};

}  // namespace ditgen::sched
