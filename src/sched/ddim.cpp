// DDIM set_timesteps and step (see ddim.h for the diffusers behaviour kept).
#include "sched/ddim.h"

#include <algorithm>
#include <cmath>

#include "sched/cogvideox_ddim.h"
#include "sched/numpy_compat.h"
#include "util/error.h"

namespace ditgen::sched {

Prediction read_prediction_type(const SchedulerConfig& config) {
  const std::string p = config.get_string("prediction_type", "epsilon");
  if (p == "epsilon") return Prediction::kEpsilon;
  if (p == "sample") return Prediction::kSample;
  if (p == "v_prediction") return Prediction::kV;
  if (p == "flow_prediction") config.unsupported("prediction_type", "prediction_type flow_prediction");
  config.bad_value("prediction_type", "expected epsilon, sample or v_prediction");
}

namespace {

// CogVideoX's float64 alphas_cumprod for a config of its class, else empty.
std::vector<double> cogvideox_alphas_of(const SchedulerConfig& config) {
  if (config.get_string("_class_name", "") != "CogVideoXDDIMScheduler") return {};
  return cogvideox_alphas_cumprod(config);
}

// The training schedule the base holds: CogVideoX's float64 alphas rounded
// to float32 (what alphas_cumprod() shows), or DDIMScheduler's own.
TrainSchedule train_schedule(const SchedulerConfig& config, const std::vector<double>& cogvideox_alphas) {
  if (cogvideox_alphas.empty()) return make_train_schedule(config);
  TrainSchedule t;
  t.num_train_timesteps = static_cast<int64_t>(cogvideox_alphas.size());
  t.alphas_cumprod.assign(cogvideox_alphas.begin(), cogvideox_alphas.end());
  return t;
}

}  // namespace

DdimScheduler::DdimScheduler(const SchedulerConfig& config) : DdimScheduler(config, cogvideox_alphas_of(config)) {}

DdimScheduler::DdimScheduler(const SchedulerConfig& config, std::vector<double> cogvideox_alphas)
    : DiffusionScheduler(config, train_schedule(config, cogvideox_alphas)),
      cogvideox_alphas_(std::move(cogvideox_alphas)) {
  const bool cogvideox = !cogvideox_alphas_.empty();
  final_alpha_cumprod_ = config.get_bool("set_alpha_to_one", true)
                             ? 1.0
                             : (cogvideox ? cogvideox_alphas_[0] : static_cast<double>(train_.alphas_cumprod[0]));
  steps_offset_ = config.get_int("steps_offset", 0);
  spacing_ = config.get_string("timestep_spacing", "leading");
  if (spacing_ != "leading" && spacing_ != "trailing" && spacing_ != "linspace") {
    config.bad_value("timestep_spacing", "expected leading, trailing or linspace");
  }
  prediction_ = read_prediction_type(config);
  clip_sample_ = !cogvideox && config.get_bool("clip_sample", true);  // CogVideoX's step never clips
  clip_range_ = static_cast<float>(config.get_number("clip_sample_range", 1.0));
  if (config.get_bool("thresholding", false)) {
    config.unsupported("thresholding", "thresholding = true");
  }
}

std::vector<int64_t> ddim_timesteps(const std::string& spacing, int64_t T, int n, int64_t steps_offset) {
  std::vector<int64_t> ts;
  if (spacing == "linspace") {
    ts = np::round_to_int(np::linspace(0.0, static_cast<double>(T - 1), n));
    std::reverse(ts.begin(), ts.end());
  } else if (spacing == "leading") {
    const int64_t ratio = T / n;
    for (int64_t i = n - 1; i >= 0; --i) ts.push_back(i * ratio + steps_offset);
  } else {  // trailing
    const double ratio = static_cast<double>(T) / n;
    ts = np::round_to_int(np::arange(static_cast<double>(T), 0.0, -ratio));
    for (int64_t& t : ts) t -= 1;
  }
  return ts;
}

void DdimScheduler::set_timesteps(int n) {
  const int64_t T = train_.num_train_timesteps;
  check_step_count(path_, n, T);
  const std::vector<int64_t> ts = ddim_timesteps(spacing_, T, n, steps_offset_);

  const auto& ac = train_.alphas_cumprod;
  const int64_t table = static_cast<int64_t>(ac.size());
  coef_.clear();
  for (const int64_t t : ts) {
    if (t < 0 || t >= table) {
      throw ConfigError(path_ + ": timestep " + std::to_string(t) + " (steps_offset " +
                        std::to_string(steps_offset_) + ", " + std::to_string(n) +
                        " steps) is outside the " + std::to_string(table) + " train timesteps");
    }
    const int64_t prev = t - T / n;  // diffusers uses T // n for every spacing
    if (!cogvideox_alphas_.empty()) {
      // CogVideoX's: float64 coefficients, each rounded once to float32.
      const double a = cogvideox_alphas_[static_cast<size_t>(t)];
      const double a_prev =
          prev >= 0 ? cogvideox_alphas_[static_cast<size_t>(std::min(prev, table - 1))] : final_alpha_cumprod_;
      const double a_t = std::sqrt((1.0 - a_prev) / (1.0 - a)), b_t = std::sqrt(a_prev) - std::sqrt(a) * a_t;
      coef_.push_back(Coef{static_cast<float>(std::sqrt(a)), static_cast<float>(std::sqrt(1.0 - a)), 0.0f, 0.0f,
                           static_cast<float>(a_t), static_cast<float>(b_t)});
      continue;
    }
    const float a = ac[t];
    const float a_prev = prev >= 0 ? ac[std::min(prev, table - 1)] : static_cast<float>(final_alpha_cumprod_);
    coef_.push_back(Coef{std::sqrt(a), std::sqrt(1.0f - a), std::sqrt(a_prev),
                         // (1 - a_prev - std_dev_t**2) ** 0.5 with eta = 0
                         std::sqrt(1.0f - a_prev - 0.0f)});
  }
  timesteps_.assign(ts.begin(), ts.end());  // int64 -> double, exact
}

void DdimScheduler::step(const Tensor& model_output, int step_index, Tensor& sample) {
  check_step(model_output, sample, step_index, coef_.size());
  const Coef c = coef_[step_index];
  const float* m = model_output.data();
  float* s = sample.data();
  const int64_t n = sample.numel();
  if (!cogvideox_alphas_.empty())
    return cogvideox_ddim_update(m, s, n, prediction_, c.sqrt_alpha, c.sqrt_beta, c.a_t, c.b_t);
  const Prediction pred = prediction_;
  const bool clip = clip_sample_;
  const float lo = -clip_range_, hi = clip_range_;
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    float x0, eps;
    if (pred == Prediction::kEpsilon) {
      x0 = (s[i] - c.sqrt_beta * m[i]) / c.sqrt_alpha;
      eps = m[i];
    } else if (pred == Prediction::kSample) {
      x0 = m[i];
      eps = (s[i] - c.sqrt_alpha * x0) / c.sqrt_beta;
    } else {
      x0 = c.sqrt_alpha * s[i] - c.sqrt_beta * m[i];
      eps = c.sqrt_alpha * m[i] + c.sqrt_beta * s[i];
    }
    if (clip) x0 = std::min(std::max(x0, lo), hi);
    s[i] = c.sqrt_alpha_prev * x0 + c.direction * eps;
  }
}

}  // namespace ditgen::sched
