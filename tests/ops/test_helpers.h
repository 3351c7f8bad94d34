// Shared helpers for op tests: deterministic random tensors and the error
// measures docs/design.md §7 prescribes (relative L2, max|Δ|/max|ref|).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::testing {

inline Tensor random_tensor(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = dist(gen);
  return t;
}

inline double rel_l2(const float* got, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}
inline double rel_l2(const Tensor& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}
inline double rel_l2(const Tensor& got, const Tensor& ref) { return rel_l2(got.data(), ref.data(), ref.numel()); }

inline double max_rel(const float* got, const float* ref, int64_t n) {
  double md = 0, mr = 0;
  for (int64_t i = 0; i < n; ++i) {
    md = std::max(md, std::fabs(static_cast<double>(got[i]) - ref[i]));
    mr = std::max(mr, std::fabs(static_cast<double>(ref[i])));
  }
  return md / (mr > 0 ? mr : 1);
}
inline double max_rel(const Tensor& got, const Tensor& ref) { return max_rel(got.data(), ref.data(), ref.numel()); }

}  // namespace ditgen::testing
