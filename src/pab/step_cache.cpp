#include "pab/step_cache.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ditgen::pab {

double polynomial(const std::vector<double>& coefficients, double x) {
  double y = 0;
  for (double c : coefficients) y = y * x + c;  // Horner, highest power first
  return y;
}

StepCache::StepCache(StepCacheSettings settings) : settings_(std::move(settings)) {
  if (!(settings_.threshold > 0)) throw std::invalid_argument("StepCache: threshold must be positive");
  if (settings_.kind == CacheKind::kTeaCache && settings_.coefficients.empty())
    throw std::invalid_argument("StepCache: teacache needs its coefficients");
}

void StepCache::begin_batch(int64_t outputs, const std::vector<bool>& halves, bool halves_apart, int steps) {
  if (outputs <= 0 || halves.empty() || halves.size() > 2 || steps <= 0)
    throw std::invalid_argument("StepCache::begin_batch: outputs > 0, one or two CFG halves, steps > 0");
  outputs_ = outputs;
  halves_ = halves;
  samples_ = outputs * static_cast<int64_t>(halves.size());
  halves_apart_ = halves_apart;
  steps_ = steps;
  signal_ = Tensor();
  residual_ = Tensor();
  whole_span_bytes_ = -1;
  step_bytes_ = 0;
  accumulated_.assign(static_cast<size_t>(units()), 0.0);
}

void StepCache::begin_step(int step, double timestep) {
  step_ = step;
  timestep_ = timestep;
}

bool StepCache::forced_step() const { return step_ == 0 || step_ == steps_ - 1; }

std::vector<float> StepCache::local_sums(const Tensor& signal) const {
  if (!signal_.defined() || signal.shape() != signal_.shape())
    throw std::logic_error("StepCache::local_sums: no previous signal of this shape");
  const int64_t per_sample = signal.numel() / samples_;
  std::vector<double> sums(static_cast<size_t>(2 * units()), 0.0);
  const float* cur = signal.data();
  const float* prev = signal_.data();
  for (int64_t s = 0; s < samples_; ++s) {
    double diff = 0, base = 0;
    for (int64_t i = s * per_sample; i < (s + 1) * per_sample; ++i) {
      diff += std::fabs(static_cast<double>(cur[i]) - prev[i]);
      base += std::fabs(static_cast<double>(prev[i]));
    }
    const size_t u = static_cast<size_t>(unit_of(s));
    sums[2 * u] += diff;
    sums[2 * u + 1] += base;
  }
  return {sums.begin(), sums.end()};
}

void StepCache::combine_halves(std::vector<float>& sums) const {
  if (combine_halves_ && !halves_apart_ && !sums.empty()) combine_halves_(sums.data(), static_cast<int64_t>(sums.size()));
}

std::vector<bool> StepCache::decide(const std::vector<float>& sums, const Tensor& signal) {
  if (signal.numel() % samples_ != 0)
    throw std::logic_error("StepCache::decide: the signal's " + std::to_string(signal.numel()) +
                           " values are not " + std::to_string(samples_) + " samples' worth");
  const bool tea = settings_.kind == CacheKind::kTeaCache;
  std::vector<bool> compute(static_cast<size_t>(units()), true);
  for (int64_t u = 0; u < units(); ++u) {
    // Unit u: output u % outputs, of half u / outputs when the halves decide apart.
    const int half = halves_apart_ ? (halves_[static_cast<size_t>(u / outputs_)] ? 1 : 0) : -1;
    StepDecision d{step_, timestep_, u % outputs_, half, -1, true, 0};
    if (!sums.empty())  // diffusers: (absmean / prev_absmean).item(); 0/0 is NaN, as there
      d.metric = static_cast<double>(sums[static_cast<size_t>(2 * u)]) / sums[static_cast<size_t>(2 * u + 1)];
    double& acc = accumulated_[static_cast<size_t>(u)];
    if (tea) {
      if (forced_step() || sums.empty()) {
        acc = 0;
      } else {
        acc += polynomial(settings_.coefficients, d.metric);
        d.computed = !(acc < settings_.threshold);  // TeaCache: skip while acc < threshold (NaN computes)
        if (d.computed) acc = 0;
      }
      d.accumulated = acc;
    } else if (!sums.empty()) {
      d.computed = d.metric > settings_.threshold;  // NaN skips, as diffusers' comparison
    }
    compute[static_cast<size_t>(u)] = d.computed;
    stats_.decisions.push_back(d);
  }
  const auto computing = std::count(compute.begin(), compute.end(), true);
  computing_ = computing == units() ? Computing::kEvery : computing > 0 ? Computing::kSome : Computing::kNone;
  if (computing > 0) ++stats_.steps_computed;
  else ++stats_.steps_skipped;
  step_bytes_ = 0;
  // Keep the signal: teacache's m_prev is every step's; first_block's r_prev the last computed step's.
  if (!signal_.defined()) {
    signal_ = signal.clone();
  } else {
    const int64_t per_sample = signal.numel() / samples_;
    for (int64_t s = 0; s < samples_; ++s)
      if (tea || compute[static_cast<size_t>(unit_of(s))])
        std::copy(signal.data() + s * per_sample, signal.data() + (s + 1) * per_sample,
                  signal_.data() + s * per_sample);
  }
  return compute;
}

namespace {

// The kept residual's element of (row r, token row0 + t, channel 0): (R, tokens, D).
inline int64_t at(int64_t r, int64_t t, int64_t row0, int64_t tokens, int64_t width) {
  return (r * tokens + row0 + t) * width;
}

}  // namespace

void StepCache::span_computed(Tensor& out, const Tensor& in, const std::vector<bool>& compute, int64_t bytes,
                              int64_t row0, int64_t tokens) {
  if (out.ndim() != 3 || in.shape() != out.shape())
    throw std::logic_error("StepCache::span_computed: the span's rows must be (R, P, D) in and out");
  const int64_t rows = out.dim(0), p = out.dim(1), width = out.dim(2);
  if (tokens == 0) tokens = p;
  if (!residual_.defined()) residual_ = Tensor::zeros({rows, tokens, width});  // the first step: every unit computes
  step_bytes_ += bytes;
  const int64_t per_sample = rows / samples_;
  float* o = out.data();
  float* r = residual_.data();
  const float* x = in.data();
  for (int64_t row = 0; row < rows; ++row) {
    const bool c = compute[static_cast<size_t>(unit_of(row / per_sample))];
    for (int64_t t = 0; t < p; ++t) {
      float* rr = r + at(row, t, row0, tokens, width);
      float* oo = o + (row * p + t) * width;
      const float* xx = x + (row * p + t) * width;
      for (int64_t j = 0; j < width; ++j) {
        if (c) rr[j] = oo[j] - xx[j];
        else oo[j] = xx[j] + rr[j];
      }
    }
  }
}

Tensor StepCache::span_skipped(int first, int last, int64_t row0, int64_t p, int64_t tokens) {
  if (pab_) pab_->skipped_layers(first, last);
  if (tokens == 0 || (row0 == 0 && p == tokens)) return residual_;
  const int64_t rows = residual_.dim(0), width = residual_.dim(2);
  Tensor part = Tensor::empty({rows, p, width});
  for (int64_t row = 0; row < rows; ++row)
    std::copy(residual_.data() + at(row, 0, row0, tokens, width), residual_.data() + at(row, p, row0, tokens, width),
              part.data() + row * p * width);
  return part;
}

void StepCache::finish_step() {
  if (computing_ == Computing::kEvery || pab_) whole_span_bytes_ = step_bytes_;  // with PAB a mixed step runs every sample too
  else if (whole_span_bytes_ >= 0)
    stats_.comm_bytes_skipped += std::max<int64_t>(whole_span_bytes_ - step_bytes_, 0);
  step_bytes_ = 0;
}

}  // namespace ditgen::pab
