// CogVideoXDdimScheduler (see cogvideox_ddim.h for the diffusers behaviour kept).
#include "sched/cogvideox_ddim.h"

#include <cmath>

#include "util/error.h"

namespace ditgen::sched {

namespace {

// torch.linspace(start, end, steps, dtype=float64) on the CPU: start + step * i
// for the first half, end - step * (steps - 1 - i) for the rest, each a fused
// multiply-add as torch's build makes it (explicit: this file is built
// without contraction).
std::vector<double> torch_linspace_f64(double start, double end, int64_t steps) {
  std::vector<double> out(static_cast<size_t>(steps));
  if (steps == 1) out[0] = start;
  if (steps <= 1) return out;
  const double step = (end - start) / static_cast<double>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    out[static_cast<size_t>(i)] = i < halfway ? std::fma(step, static_cast<double>(i), start)
                                              : std::fma(-step, static_cast<double>(steps - i - 1), end);
  return out;
}

}  // namespace

CogVideoXDdimScheduler::CogVideoXDdimScheduler(const SchedulerConfig& config) : path_(config.path()) {
  num_train_timesteps_ = config.get_int("num_train_timesteps", 1000);
  if (num_train_timesteps_ < 2) config.bad_value("num_train_timesteps", "must be at least 2");
  if (config.get_optional_numbers("trained_betas"))
    config.unsupported("trained_betas", "trained_betas with CogVideoXDDIMScheduler");
  const std::string schedule = config.get_string("beta_schedule", "scaled_linear");
  if (schedule != "scaled_linear")
    config.unsupported("beta_schedule", "CogVideoXDDIMScheduler with beta_schedule " + schedule);
  const double beta_start = config.get_number("beta_start", 0.00085);
  const double beta_end = config.get_number("beta_end", 0.0120);
  if (!(beta_start > 0 && beta_end > 0 && beta_start < 1 && beta_end < 1))
    config.bad_value("beta_start", "beta_start and beta_end must lie in (0, 1)");
  const double snr_shift = config.get_number("snr_shift_scale", 3.0);
  if (!(snr_shift > 0)) config.bad_value("snr_shift_scale", "must be positive");

  // betas = linspace(sqrt(beta_start), sqrt(beta_end)) ** 2; alphas_cumprod =
  // cumprod(1 - betas); all float64.
  const std::vector<double> roots = torch_linspace_f64(std::sqrt(beta_start), std::sqrt(beta_end), num_train_timesteps_);
  alphas_cumprod_.resize(roots.size());
  double acc = 1.0;
  for (size_t i = 0; i < roots.size(); ++i) {
    acc *= 1.0 - roots[i] * roots[i];
    alphas_cumprod_[i] = acc;
  }
  for (double& a : alphas_cumprod_) a = a / (snr_shift + (1.0 - snr_shift) * a);
  if (config.get_bool("rescale_betas_zero_snr", false)) {
    // rescale_zero_terminal_snr on alphas_cumprod: shift sqrt so the last is
    // 0, scale so the first keeps its value, square.
    const double first = std::sqrt(alphas_cumprod_.front()), last = std::sqrt(alphas_cumprod_.back());
    const double scale = first / (first - last);
    for (double& a : alphas_cumprod_) {
      const double r = (std::sqrt(a) - last) * scale;
      a = r * r;
    }
  }
  final_alpha_cumprod_ = config.get_bool("set_alpha_to_one", true) ? 1.0 : alphas_cumprod_.front();
  steps_offset_ = config.get_int("steps_offset", 0);
  spacing_ = config.get_string("timestep_spacing", "leading");
  if (spacing_ != "leading" && spacing_ != "trailing" && spacing_ != "linspace")
    config.bad_value("timestep_spacing", "expected leading, trailing or linspace");
  prediction_ = read_prediction_type(config);
  if (config.get_bool("thresholding", false)) config.unsupported("thresholding", "thresholding = true");
}

void CogVideoXDdimScheduler::set_timesteps(int n) {
  const int64_t T = num_train_timesteps_;
  check_step_count(path_, n, T);
  const std::vector<int64_t> ts = ddim_timesteps(spacing_, T, n, steps_offset_);
  coef_.clear();
  for (const int64_t t : ts) {
    if (t < 0 || t >= T)
      throw ConfigError(path_ + ": timestep " + std::to_string(t) + " (steps_offset " + std::to_string(steps_offset_) +
                        ", " + std::to_string(n) + " steps) is outside the " + std::to_string(T) + " train timesteps");
    const int64_t prev = t - T / n;
    const double a = alphas_cumprod_[static_cast<size_t>(t)];
    const double a_prev = prev >= 0 ? alphas_cumprod_[static_cast<size_t>(prev)] : final_alpha_cumprod_;
    const double beta = 1.0 - a;
    const double a_t = std::sqrt((1.0 - a_prev) / beta);
    const double b_t = std::sqrt(a_prev) - std::sqrt(a) * a_t;
    coef_.push_back(Coef{static_cast<float>(std::sqrt(a)), static_cast<float>(std::sqrt(beta)),
                         static_cast<float>(a_t), static_cast<float>(b_t)});
  }
  timesteps_.assign(ts.begin(), ts.end());
}

void CogVideoXDdimScheduler::step(const Tensor& model_output, int step_index, Tensor& sample) {
  check_step(model_output, sample, step_index, coef_.size());
  const Coef c = coef_[static_cast<size_t>(step_index)];
  const float* m = model_output.data();
  float* s = sample.data();
  const int64_t n = sample.numel();
  const Prediction pred = prediction_;
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    float x0;
    if (pred == Prediction::kEpsilon)
      x0 = (s[i] - c.sqrt_beta * m[i]) / c.sqrt_alpha;
    else if (pred == Prediction::kSample)
      x0 = m[i];
    else
      x0 = c.sqrt_alpha * s[i] - c.sqrt_beta * m[i];
    s[i] = c.a_t * s[i] + c.b_t * x0;
  }
}

}  // namespace ditgen::sched
