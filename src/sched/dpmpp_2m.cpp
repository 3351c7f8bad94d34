// DPM-Solver++(2M): set_timesteps (diffusers' spacing, sigma lookup, final
// sigma) and the first- / second-order multistep update.
#include "sched/dpmpp_2m.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sched/numpy_compat.h"
#include "util/error.h"

namespace ditgen::sched {

namespace {

// sigma_t -> (alpha_t, sigma_t) as _sigma_to_alpha_sigma_t, and lambda.
struct AlphaSigma {
  float alpha, sigma, lambda;
};
AlphaSigma alpha_sigma(float s) {
  const float alpha = 1.0f / std::sqrt(s * s + 1.0f);
  const float sigma = s * alpha;
  return {alpha, sigma, std::log(alpha) - std::log(sigma)};  // sigma 0 -> +inf
}

}  // namespace

DpmSolverPP2MScheduler::DpmSolverPP2MScheduler(const SchedulerConfig& config)
    : DiffusionScheduler(config) {
  if (const int64_t order = config.get_int("solver_order", 2); order != 2) {
    config.unsupported("solver_order", "DPM-Solver solver_order " + std::to_string(order) +
                                           " (dpmpp_2m is order 2)");
  }
  const std::string algorithm = config.get_string("algorithm_type", "dpmsolver++");
  if (algorithm == "dpmsolver" || algorithm == "sde-dpmsolver" || algorithm == "sde-dpmsolver++") {
    config.unsupported("algorithm_type", "DPM-Solver algorithm_type " + algorithm);
  } else if (algorithm != "dpmsolver++" && algorithm != "deis") {
    config.bad_value("algorithm_type", "expected dpmsolver++, dpmsolver, sde-dpmsolver++ or sde-dpmsolver");
  }
  const std::string solver = config.get_string("solver_type", "midpoint");
  if (solver == "heun") {
    heun_ = true;
  } else if (solver == "midpoint" || solver == "logrho" || solver == "bh1" || solver == "bh2") {
    heun_ = false;
  } else {
    config.bad_value("solver_type", "expected midpoint or heun");
  }
  prediction_ = read_prediction_type(config);
  if (config.get_bool("thresholding", false)) config.unsupported("thresholding", "thresholding = true");
  for (const char* key : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas",
                          "use_lu_lambdas", "use_flow_sigmas"}) {
    if (config.get_bool(key, false)) config.unsupported(key, std::string(key) + " = true");
  }
  if (const auto vt = config.get_optional_string("variance_type");
      vt && (*vt == "learned" || *vt == "learned_range") && prediction_ == Prediction::kEpsilon) {
    // diffusers then keeps model_output[:, :3], an image-model assumption.
    config.unsupported("variance_type", "DPM-Solver variance_type " + *vt);
  }
  lower_order_final_ = config.get_bool("lower_order_final", true);
  euler_at_final_ = config.get_bool("euler_at_final", false);
  const std::string final_sigmas = config.get_string("final_sigmas_type", "zero");
  if (final_sigmas != "zero" && final_sigmas != "sigma_min") {
    config.bad_value("final_sigmas_type", "expected zero or sigma_min");
  }
  final_sigma_min_ = final_sigmas == "sigma_min";
  lambda_min_clipped_ =
      config.get_number("lambda_min_clipped", -std::numeric_limits<double>::infinity());
  const std::string spacing = config.get_string("timestep_spacing", "linspace");
  if (spacing == "linspace") {
    spacing_ = Spacing::kLinspace;
  } else if (spacing == "leading") {
    spacing_ = Spacing::kLeading;
  } else if (spacing == "trailing") {
    spacing_ = Spacing::kTrailing;
  } else {
    config.bad_value("timestep_spacing", "expected linspace, leading or trailing");
  }
  steps_offset_ = config.get_int("steps_offset", 0);
}

void DpmSolverPP2MScheduler::set_timesteps(int n) {
  const int64_t T = train_.num_train_timesteps;
  const auto& ac = train_.alphas_cumprod;
  const int64_t table = static_cast<int64_t>(ac.size());
  check_step_count(path_, n, T);

  // clipped_idx = searchsorted(flip(lambda_t), lambda_min_clipped): the number
  // of train timesteps, from the noisy end, whose float32 lambda is below the
  // clip value (compared in float32, as torch casts the scalar).
  const float clip = static_cast<float>(lambda_min_clipped_);
  int64_t clipped_idx = 0;
  for (int64_t i = table - 1; i >= 0; --i) {
    const float lambda = std::log(std::sqrt(ac[i])) - std::log(std::sqrt(1.0f - ac[i]));
    if (lambda >= clip) break;
    ++clipped_idx;
  }
  const int64_t last = T - clipped_idx;

  std::vector<int64_t> ts;
  if (spacing_ == Spacing::kLinspace) {
    auto all = np::round_to_int(np::linspace(0.0, static_cast<double>(last - 1), n + 1));
    ts.assign(all.rbegin(), all.rend() - 1);  // [::-1][:-1]
  } else if (spacing_ == Spacing::kLeading) {
    const int64_t ratio = last / (n + 1);  // Python floor division of non-negatives
    for (int64_t i = n; i >= 1; --i) ts.push_back(i * ratio + steps_offset_);
  } else {
    const double ratio = static_cast<double>(T) / n;
    ts = np::round_to_int(np::arange(static_cast<double>(last), 0.0, -ratio));
    for (int64_t& t : ts) t -= 1;
  }
  if (ts.empty()) {
    throw ConfigError(path_ + ": lambda_min_clipped leaves no timesteps for " +
                      std::to_string(n) + " steps");
  }

  // sigmas at the timesteps (np.interp clamps outside the table), then the final one.
  sigmas_.clear();
  const auto sigma_at = [&](int64_t t) {
    const float a = ac[std::clamp<int64_t>(t, 0, table - 1)];
    return std::sqrt((1.0f - a) / a);
  };
  for (const int64_t t : ts) sigmas_.push_back(sigma_at(t));
  sigmas_.push_back(final_sigma_min_ ? sigma_at(0) : 0.0f);

  // Per-step order and coefficients (diffusers' step(), lower_order_nums
  // counts completed steps: the first step is first order).
  const int64_t steps = static_cast<int64_t>(ts.size());
  coef_.assign(steps, Coef{});
  for (int64_t i = 0; i < steps; ++i) {
    const bool final_low = i == steps - 1 &&
                           (euler_at_final_ || (lower_order_final_ && steps < 15) || !final_sigma_min_);
    Coef& c = coef_[i];
    c.order = (i == 0 || final_low) ? 1 : 2;
    const AlphaSigma t = alpha_sigma(sigmas_[i + 1]);
    const AlphaSigma s0 = alpha_sigma(sigmas_[i]);
    c.alpha_s0 = s0.alpha;
    c.sigma_s0 = s0.sigma;
    const float h = t.lambda - s0.lambda;
    const float em1 = std::exp(-h) - 1.0f;
    c.c_sample = t.sigma / s0.sigma;
    c.c_d0 = t.alpha * em1;
    if (c.order == 2) {
      const AlphaSigma s1 = alpha_sigma(sigmas_[i - 1]);
      const float r0 = (s0.lambda - s1.lambda) / h;
      c.inv_r0 = 1.0f / r0;
      // midpoint: x - (0.5*c_d0)*D1; heun: x + (alpha_t*((e^-h - 1)/h + 1))*D1.
      // Stored signed so the step adds it (a - b == a + (-b) exactly).
      c.c_d1 = heun_ ? t.alpha * (em1 / h + 1.0f) : -(0.5f * c.c_d0);
    }
  }
  timesteps_.assign(ts.begin(), ts.end());  // int64 -> double, exact
  next_step_ = -1;
}

void DpmSolverPP2MScheduler::step(const Tensor& model_output, int step_index, Tensor& sample) {
  check_step(model_output, sample, step_index, coef_.size(), next_step_);
  if (needs_history(step_index, prev_x0_, sample)) prev_x0_ = Tensor::empty(sample.shape());

  const Coef c = coef_[step_index];
  const float* m = model_output.data();
  float* s = sample.data();
  float* hist = prev_x0_.data();
  const int64_t n = sample.numel();
  const Prediction pred = prediction_;
  const bool second = c.order == 2;
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    // convert_model_output: the x0 prediction.
    float x0;
    if (pred == Prediction::kEpsilon) {
      x0 = (s[i] - c.sigma_s0 * m[i]) / c.alpha_s0;
    } else if (pred == Prediction::kSample) {
      x0 = m[i];
    } else {
      x0 = c.alpha_s0 * s[i] - c.sigma_s0 * m[i];
    }
    float x = c.c_sample * s[i] - c.c_d0 * x0;
    if (second) {
      const float d1 = c.inv_r0 * (x0 - hist[i]);
      x = x + c.c_d1 * d1;
    }
    hist[i] = x0;
    s[i] = x;
  }
  next_step_ = step_index + 1;
}

}  // namespace ditgen::sched
