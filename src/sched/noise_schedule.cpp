// Betas and alphas_cumprod as diffusers' DDIMScheduler /
// DPMSolverMultistepScheduler __init__ computes them (see noise_schedule.h).
#include "sched/noise_schedule.h"

#include <cmath>
#include <numbers>

#include "util/error.h"

namespace ditgen::sched {

namespace {

// diffusers' betas_for_alpha_bar with the default cosine transform.
std::vector<float> cosine_betas(int64_t n) {
  const auto alpha_bar = [](double t) {
    const double c = std::cos((t + 0.008) / 1.008 * std::numbers::pi / 2);
    return c * c;
  };
  std::vector<float> betas(n);
  for (int64_t i = 0; i < n; ++i) {
    const double t1 = static_cast<double>(i) / static_cast<double>(n);
    const double t2 = static_cast<double>(i + 1) / static_cast<double>(n);
    betas[i] = static_cast<float>(std::min(1 - alpha_bar(t2) / alpha_bar(t1), 0.999));
  }
  return betas;
}

}  // namespace

TrainSchedule make_train_schedule(const SchedulerConfig& config) {
  TrainSchedule s;
  s.num_train_timesteps = config.get_int("num_train_timesteps", 1000);
  if (s.num_train_timesteps < 1) config.bad_value("num_train_timesteps", "must be at least 1");
  const double beta_start = config.get_number("beta_start", 0.0001);
  const double beta_end = config.get_number("beta_end", 0.02);
  const std::string schedule = config.get_string("beta_schedule", "linear");
  const auto trained = config.get_optional_numbers("trained_betas");
  if (config.get_bool("rescale_betas_zero_snr", false)) {
    config.unsupported("rescale_betas_zero_snr", "rescale_betas_zero_snr = true");
  }

  if (trained) {
    if (static_cast<int64_t>(trained->size()) < s.num_train_timesteps) {
      config.bad_value("trained_betas", "has " + std::to_string(trained->size()) +
                                            " entries, fewer than num_train_timesteps = " +
                                            std::to_string(s.num_train_timesteps));
    }
    s.betas.assign(trained->begin(), trained->end());  // double -> float32
  } else if (schedule == "linear") {
    s.betas = torch_linspace_f32(beta_start, beta_end, s.num_train_timesteps);
  } else if (schedule == "scaled_linear") {
    s.betas = torch_linspace_f32(std::sqrt(beta_start), std::sqrt(beta_end), s.num_train_timesteps);
    for (float& b : s.betas) b = b * b;
  } else if (schedule == "squaredcos_cap_v2") {
    s.betas = cosine_betas(s.num_train_timesteps);
  } else {
    config.bad_value("beta_schedule", "expected linear, scaled_linear or squaredcos_cap_v2");
  }

  s.alphas_cumprod.resize(s.betas.size());
  double acc = 1.0;  // torch's CPU cumprod accumulates float32 in double
  for (size_t i = 0; i < s.betas.size(); ++i) {
    const float alpha = 1.0f - s.betas[i];
    acc *= static_cast<double>(alpha);
    s.alphas_cumprod[i] = static_cast<float>(acc);
  }
  for (size_t i = 0; i < s.alphas_cumprod.size(); ++i) {
    if (!(s.alphas_cumprod[i] > 0.0f && s.alphas_cumprod[i] < 1.0f)) {
      config.bad_value(trained ? "trained_betas" : "beta_schedule",
                       "gives alphas_cumprod[" + std::to_string(i) + "] = " +
                           std::to_string(s.alphas_cumprod[i]) + ", outside (0, 1)");
    }
  }
  return s;
}

}  // namespace ditgen::sched
