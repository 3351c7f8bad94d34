// CogVideoXDDIMScheduler's schedule and update (see cogvideox_ddim.h).
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

std::vector<double> cogvideox_alphas_cumprod(const SchedulerConfig& config) {
  const int64_t T = config.get_int("num_train_timesteps", 1000);
  if (T < 2) config.bad_value("num_train_timesteps", "must be at least 2");
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
  const std::vector<double> roots = torch_linspace_f64(std::sqrt(beta_start), std::sqrt(beta_end), T);
  std::vector<double> ac(roots.size());
  double acc = 1.0;
  for (size_t i = 0; i < roots.size(); ++i) {
    acc *= 1.0 - roots[i] * roots[i];
    ac[i] = acc;
  }
  for (double& a : ac) a = a / (snr_shift + (1.0 - snr_shift) * a);
  if (config.get_bool("rescale_betas_zero_snr", false)) {
    // rescale_zero_terminal_snr on alphas_cumprod: shift sqrt so the last is
    // 0, scale so the first keeps its value, square.
    const double first = std::sqrt(ac.front()), last = std::sqrt(ac.back());
    const double scale = first / (first - last);
    for (double& a : ac) {
      const double r = (std::sqrt(a) - last) * scale;
      a = r * r;
    }
  }
  return ac;
}

void cogvideox_ddim_update(const float* m, float* s, int64_t n, Prediction pred, float sqrt_alpha, float sqrt_beta,
                           float a_t, float b_t) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    float x0;
    if (pred == Prediction::kEpsilon)
      x0 = (s[i] - sqrt_beta * m[i]) / sqrt_alpha;
    else if (pred == Prediction::kSample)
      x0 = m[i];
    else
      x0 = sqrt_alpha * s[i] - sqrt_beta * m[i];
    s[i] = a_t * s[i] + b_t * x0;
  }
}

}  // namespace ditgen::sched
