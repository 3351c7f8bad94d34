#include "pab/step_cache.h"

#include <stdexcept>

namespace ditgen::pab {

FirstBlockCache::FirstBlockCache(double threshold) : threshold_(threshold) {
  if (!(threshold > 0)) throw std::invalid_argument("FirstBlockCache: threshold must be positive");
}

void FirstBlockCache::begin_batch(int64_t outputs, int64_t samples) {
  if (outputs <= 0 || samples <= 0 || samples % outputs != 0)
    throw std::invalid_argument("FirstBlockCache::begin_batch: samples must be a positive multiple of outputs");
  outputs_ = outputs;
  samples_ = samples;
  has_previous_ = false;
  first_residual = Tensor();
  rest_residual = Tensor();
}

void FirstBlockCache::begin_step(int step, double timestep) {
  step_ = step;
  timestep_ = timestep;
}

void FirstBlockCache::combine_halves(std::vector<float>& sums) const {
  if (combine_halves_ && !sums.empty()) combine_halves_(sums.data(), static_cast<int64_t>(sums.size()));
}

std::vector<bool> FirstBlockCache::decide(const std::vector<float>& sums) {
  std::vector<bool> compute(static_cast<size_t>(outputs_), true);
  for (int64_t o = 0; o < outputs_; ++o) {
    StepDecision d{step_, timestep_, o, -1, true};
    if (has_previous_) {
      // diffusers: (absmean / prev_absmean).item() > threshold; 0/0 is NaN and skips, as there.
      d.metric = static_cast<double>(sums[static_cast<size_t>(2 * o)]) / static_cast<double>(sums[static_cast<size_t>(2 * o + 1)]);
      d.computed = d.metric > threshold_;
    }
    compute[static_cast<size_t>(o)] = d.computed;
    stats_.decisions.push_back(d);
  }
  return compute;
}

void FirstBlockCache::rest_computed(int64_t bytes) {
  ++stats_.steps_computed;
  last_rest_bytes_ = bytes;
}

void FirstBlockCache::rest_skipped() {
  ++stats_.steps_skipped;
  stats_.comm_bytes_skipped += last_rest_bytes_;
}

}  // namespace ditgen::pab
