// FlowMatchEulerDiscreteScheduler: the construction-time sigma range, the
// float64 schedule and the float32 Euler step (see flow_match_euler.h).
// Built with -ffp-contract=off (CMakeLists.txt): torch rounds every multiply
// and add, so a fused multiply-add would not match it.
#include "sched/flow_match_euler.h"

#include <stdexcept>

#include "sched/flow_config.h"
#include "sched/numpy_compat.h"
#include "util/error.h"

namespace ditgen::sched {

FlowMatchEulerScheduler::FlowMatchEulerScheduler(const SchedulerConfig& config,
                                                 std::optional<double> shift_override)
    : FlowScheduler(config) {
  shift_ = resolve_flow_shift(config, shift_override);
  refuse_flow_sigma_options(config, "FlowMatchEuler");
  if (config.get_bool("invert_sigmas", false)) {
    config.unsupported("invert_sigmas", "FlowMatchEuler with invert_sigmas = true");
  }
  if (config.get_bool("stochastic_sampling", false)) {
    config.unsupported("stochastic_sampling", "FlowMatchEuler with stochastic_sampling = true");
  }
  // Used only by dynamic shifting, but diffusers' constructor checks it.
  const std::string time_shift = config.get_string("time_shift_type", "exponential");
  if (time_shift != "exponential" && time_shift != "linear") {
    config.bad_value("time_shift_type", "expected exponential or linear");
  }

  // The constructor's float32 schedule at its two ends: train timesteps T
  // and 1 over T, shifted with torch's float32 scalars.
  const float T = static_cast<float>(num_train_timesteps_);
  const float shift = static_cast<float>(shift_);
  const float shift_minus_1 = static_cast<float>(shift_ - 1.0);
  const auto shifted = [&](float s) { return shift * s / (1.0f + shift_minus_1 * s); };
  sigma_max_ = shifted(T / T);
  sigma_min_ = shifted(1.0f / T);
}

void FlowMatchEulerScheduler::set_timesteps(int n) {
  check_step_count(path_, n, num_train_timesteps_);
  const int64_t T = num_train_timesteps_;
  const double t = static_cast<double>(T);
  const std::vector<double> spaced = np::linspace(sigma_max_ * t, sigma_min_ * t, n);
  sigmas_.clear();
  timesteps_.clear();
  for (const double timestep : spaced) {
    const double s = timestep / t;
    const float sigma = static_cast<float>(shift_ * s / (1.0 + (shift_ - 1.0) * s));
    // A positive shift keeps it in [0, 1]; one so small that float32
    // underflows does not (the constructor's range becomes 0 / 0).
    if (!(sigma >= 0.0f && sigma <= 1.0f)) {
      throw ConfigError(path_ + ": shift " + std::to_string(shift_) + " gives the sigma " +
                        std::to_string(sigma) + ", outside [0, 1]");
    }
    sigmas_.push_back(sigma);
    timesteps_.push_back(sigma * static_cast<float>(T));  // float32 product
  }
  sigmas_.push_back(0.0f);
}

void FlowMatchEulerScheduler::step(const Tensor& model_output, int step_index, Tensor& sample) {
  if (step_index < 0 || step_index + 1 >= static_cast<int>(sigmas_.size())) {
    throw std::logic_error("euler step " + std::to_string(step_index) + " of " +
                           std::to_string(timesteps_.size()) + " (set_timesteps first)");
  }
  if (model_output.shape() != sample.shape()) {
    throw std::logic_error("euler step: model_output " + shape_str(model_output.shape()) +
                           " vs sample " + shape_str(sample.shape()));
  }
  const float dt = sigmas_[step_index + 1] - sigmas_[step_index];
  const float* v = model_output.data();
  float* s = sample.data();
  const int64_t n = sample.numel();
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) s[i] = s[i] + dt * v[i];
}

}  // namespace ditgen::sched
