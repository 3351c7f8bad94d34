// UniPC on flow sigmas: the float64 schedule, the float32 per-step
// coefficients of UniP and UniC, and the fused elementwise step (see
// unipc_flow.h). Built with -ffp-contract=off (CMakeLists.txt): torch rounds
// every multiply and add, so a fused multiply-add would not match it.
#include "sched/unipc_flow.h"

#include <algorithm>
#include <cmath>

#include "sched/flow_config.h"
#include "sched/numpy_compat.h"
#include "util/error.h"

namespace ditgen::sched {

namespace {

// _sigma_to_alpha_sigma_t on flow sigmas, and lambda (+inf at sigma 0).
struct FlowPoint {
  float alpha, sigma, lambda;
};
FlowPoint flow_point(float sigma) {
  const float alpha = 1.0f - sigma;
  return {alpha, sigma, std::log(alpha) - std::log(sigma)};
}

// What multistep_uni_p_bh_update and multistep_uni_c_bh_update compute from
// the two sigmas alone (predict_x0, bh2), in their order of float32 ops.
struct Update {
  float h;
  float c_sample;  // sigma_t / sigma_s0
  float c_x0;      // alpha_t * h_phi_1
  float c_d;       // alpha_t * B_h
  float b1, b2;    // the right-hand side b of UniC-2
};
Update bh2_update(const FlowPoint& t, const FlowPoint& s0) {
  Update u;
  u.h = t.lambda - s0.lambda;
  const float hh = -u.h;
  const float h_phi_1 = std::expm1(hh);
  float h_phi_k = h_phi_1 / hh - 1.0f;
  const float b_h = std::expm1(hh);  // bh2: B(h) = e^-h - 1
  u.c_sample = t.sigma / s0.sigma;
  u.c_x0 = t.alpha * h_phi_1;
  u.c_d = t.alpha * b_h;
  u.b1 = h_phi_k * 1.0f / b_h;
  h_phi_k = h_phi_k / hh - 0.5f;  // 1 / factorial 2
  u.b2 = h_phi_k * 2.0f / b_h;
  return u;
}

// torch.linalg.solve([[1, 1], [rk, 1]], [b1, b2]) in float32 as torch's
// LAPACK (MKL sgesv) does it: partial pivoting (the larger |first column|
// entry leads, the first on a tie), the multiplier and both back
// substitutions scaled by reciprocals, no fused multiply-adds. Given the same
// inputs, this matches torch 2.15 bit for bit on every UniC-2 system of the
// fixtures' schedules (scripts/fixtures/make_flow_sched_fixtures.py).
struct Rhos {
  float rho0, rho1;
};
Rhos solve_unic2(float rk, float b1, float b2) {
  const bool swap = std::fabs(rk) > 1.0f;  // then [[rk, 1], [1, 1]] x = [b2, b1]
  const float pivot = swap ? rk : 1.0f;
  const float below = swap ? 1.0f : rk;
  const float rhs1 = swap ? b2 : b1;
  const float rhs2 = swap ? b1 : b2;
  const float l = below * (1.0f / pivot);
  const float u22 = 1.0f - l * 1.0f;
  const float x2 = (rhs2 - l * rhs1) * (1.0f / u22);
  const float x1 = (rhs1 - 1.0f * x2) * (1.0f / pivot);
  return {x1, x2};
}

}  // namespace

UniPcFlowScheduler::UniPcFlowScheduler(const SchedulerConfig& config,
                                       std::optional<double> shift_override)
    : FlowScheduler(config) {
  // Built from a FlowMatch config, unipc runs on flow sigmas by construction
  // (flow_config.h); from its own (or DPM-Solver's) config, the config says so.
  if (!is_flow_match_config(config)) {
    const std::string prediction = config.get_string("prediction_type", "epsilon");
    if (prediction == "epsilon" || prediction == "sample" || prediction == "v_prediction") {
      config.unsupported("prediction_type", "UniPC with prediction_type " + prediction +
                                                " (unipc is UniPC on flow sigmas, for flow_prediction models)");
    } else if (prediction != "flow_prediction") {
      config.bad_value("prediction_type", "expected flow_prediction, epsilon, sample or v_prediction");
    }
    if (!config.get_bool("use_flow_sigmas", false)) {
      config.unsupported("use_flow_sigmas", "UniPC flow_prediction without use_flow_sigmas = true");
    }
  }
  shift_ = resolve_flow_shift(config, shift_override);
  refuse_flow_sigma_options(config, "UniPC");
  if (const int64_t order = config.get_int("solver_order", 2); order != 2) {
    config.unsupported("solver_order",
                       "UniPC solver_order " + std::to_string(order) + " (unipc is order 2)");
  }
  // diffusers maps DPM-Solver's names for its solver types to bh2.
  const std::string solver = config.get_string("solver_type", "bh2");
  if (solver == "bh1") {
    config.unsupported("solver_type", "UniPC solver_type bh1");
  } else if (solver != "bh2" && solver != "midpoint" && solver != "heun" && solver != "logrho") {
    config.bad_value("solver_type", "expected bh1 or bh2");
  }
  if (!config.get_bool("predict_x0", true)) config.unsupported("predict_x0", "UniPC predict_x0 = false");
  // Without it diffusers runs UniP-2 into the final sigma 0, where h is
  // infinite: its sample becomes inf / nan.
  if (!config.get_bool("lower_order_final", true)) {
    config.unsupported("lower_order_final", "UniPC lower_order_final = false");
  }
  const std::string final_sigmas = config.get_string("final_sigmas_type", "zero");
  if (final_sigmas == "sigma_min") {
    config.unsupported("final_sigmas_type", "UniPC final_sigmas_type sigma_min");
  } else if (final_sigmas != "zero") {
    config.bad_value("final_sigmas_type", "expected zero or sigma_min");
  }
  if (config.get_bool("thresholding", false)) config.unsupported("thresholding", "thresholding = true");
  if (config.has("solver_p")) config.unsupported("solver_p", "UniPC with a solver_p scheduler");
  disable_corrector_ = config.get_optional_numbers("disable_corrector").value_or(std::vector<double>{});
  // Flow sigmas replace the spaced timesteps, but diffusers still rejects
  // an unknown spacing.
  const std::string spacing = config.get_string("timestep_spacing", "linspace");
  if (spacing != "linspace" && spacing != "leading" && spacing != "trailing") {
    config.bad_value("timestep_spacing", "expected linspace, leading or trailing");
  }
}

void UniPcFlowScheduler::set_timesteps(int n) {
  check_step_count(path_, n, num_train_timesteps_);
  const int64_t T = num_train_timesteps_;
  // The schedule in float64, as numpy computes it.
  std::vector<double> sigmas = np::linspace(1.0, 1.0 / static_cast<double>(T), n + 1);
  sigmas.pop_back();
  for (double& s : sigmas) s = shift_ * s / (1.0 + (shift_ - 1.0) * s);
  if (std::fabs(sigmas[0] - 1.0) < 1e-6) sigmas[0] -= 1e-6;
  // A positive shift keeps them in (0, 1]; one so small that the schedule
  // underflows does not (an infinite sigma has no int64 timestep, and a
  // float32 sigma 0 before the end has no finite lambda).
  for (const double s : sigmas) {
    if (!(s >= 0.0 && s <= 1.0 && static_cast<float>(s) > 0.0f)) {
      throw ConfigError(path_ + ": flow shift " + std::to_string(shift_) + " gives the sigma " +
                        std::to_string(s) + ", outside (0, 1]");
    }
  }
  timesteps_.clear();
  sigmas_.clear();
  for (const double s : sigmas) {
    // torch's int64 cast truncates; the sigmas go on in float32.
    timesteps_.push_back(static_cast<double>(static_cast<int64_t>(s * static_cast<double>(T))));
    sigmas_.push_back(static_cast<float>(s));
  }
  sigmas_.push_back(0.0f);  // final_sigmas_type zero

  const auto disabled = [&](int i) {
    return std::find(disable_corrector_.begin(), disable_corrector_.end(), static_cast<double>(i)) !=
           disable_corrector_.end();
  };
  coef_.assign(n, Coef{});
  for (int i = 0; i < n; ++i) {
    Coef& c = coef_[i];
    c.sigma = sigmas_[i];
    // UniP from sigma_i to sigma_{i+1}; warm-up and lower_order_final.
    c.predictor_order = std::min({2, i + 1, n - i});
    const FlowPoint s0 = flow_point(sigmas_[i]);
    const Update p = bh2_update(flow_point(sigmas_[i + 1]), s0);
    c.c_sample_p = p.c_sample;
    c.c_x0_p = p.c_x0;
    c.c_d_p = p.c_d;
    if (c.predictor_order == 2) c.rk_p = (flow_point(sigmas_[i - 1]).lambda - s0.lambda) / p.h;
    // UniC redoes step i-1 (sigma_{i-1} -> sigma_i) with x0_i, at its order.
    c.correct = i > 0 && !disabled(i - 1);
    if (c.correct) {
      c.corrector_order = coef_[i - 1].predictor_order;
      const FlowPoint c0 = flow_point(sigmas_[i - 1]);
      const Update u = bh2_update(flow_point(sigmas_[i]), c0);
      c.c_sample_c = u.c_sample;
      c.c_x0_c = u.c_x0;
      c.c_d_c = u.c_d;
      if (c.corrector_order == 2) {
        c.rk_c = (flow_point(sigmas_[i - 2]).lambda - c0.lambda) / u.h;
        const Rhos rhos = solve_unic2(c.rk_c, u.b1, u.b2);
        c.rho0_c = rhos.rho0;
        c.rho1_c = rhos.rho1;
      } else {
        c.rho1_c = 0.5f;
      }
    }
  }
  next_step_ = -1;
}

void UniPcFlowScheduler::step(const Tensor& model_output, int step_index, Tensor& sample) {
  check_step(model_output, sample, step_index, coef_.size(), next_step_);
  if (needs_history(step_index, prev_x0_, sample)) {
    prev_x0_ = Tensor::zeros(sample.shape());
    prev_prev_x0_ = Tensor::zeros(sample.shape());
    last_sample_ = Tensor::zeros(sample.shape());
  }

  const Coef c = coef_[step_index];
  const float* m = model_output.data();
  float* s = sample.data();
  float* x0_1 = prev_x0_.data();
  float* x0_2 = prev_prev_x0_.data();
  float* last = last_sample_.data();
  const int64_t n = sample.numel();
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const float x0 = s[i] - c.sigma * m[i];  // convert_model_output, flow_prediction
    float x = s[i];
    if (c.correct) {  // UniC: last -> this sample again, with x0 of this step
      const float base = c.c_sample_c * last[i] - c.c_x0_c * x0_1[i];
      const float d1_t = x0 - x0_1[i];
      float res;
      if (c.corrector_order == 2) {
        const float d1 = (x0_2[i] - x0_1[i]) / c.rk_c;
        res = c.rho0_c * d1 + c.rho1_c * d1_t;
      } else {
        res = c.rho1_c * d1_t;  // diffusers adds its int 0 first: exact
      }
      x = base - c.c_d_c * res;
    }
    last[i] = x;
    float next = c.c_sample_p * x - c.c_x0_p * x0;  // UniP
    if (c.predictor_order == 2) {
      const float d1 = (x0_1[i] - x0) / c.rk_p;
      next = next - c.c_d_p * (0.5f * d1);  // rhos_p = 0.5
    } else {
      next = next - c.c_d_p * 0.0f;  // diffusers' pred_res = 0
    }
    x0_2[i] = x0_1[i];
    x0_1[i] = x0;
    s[i] = next;
  }
  next_step_ = step_index + 1;
}

}  // namespace ditgen::sched
