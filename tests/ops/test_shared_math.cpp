// The __host__ __device__ formulas of kernels/math/ (norm.h, softmax.h,
// embedding.h) against plain double-precision loops: the CUDA kernels run the
// same norm and softmax functions, so these tests cover them on both backends.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/math/embedding.h"
#include "kernels/math/norm.h"
#include "kernels/math/softmax.h"

using namespace ditgen;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Ref { double mean, m2; };
Ref two_pass(const std::vector<float>& v, size_t begin, size_t end) {
  double s = 0, q = 0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  const double mean = s / static_cast<double>(end - begin);
  for (size_t i = begin; i < end; ++i) q += (v[i] - mean) * (v[i] - mean);
  return {mean, q};
}

}  // namespace

TEST_CASE("moments: Welford pushes and Chan combines match a two-pass reference") {
  // Large mean, small spread: E[x^2] - E[x]^2 would lose every digit here.
  const std::vector<float> v = random_values(1000, 1, 999.0f, 1001.0f);
  const Ref ref = two_pass(v, 0, v.size());

  math::Moments all;
  for (float x : v) math::moments_push(all, x);
  CHECK(all.n == 1000.0f);
  CHECK(all.mean == doctest::Approx(ref.mean).epsilon(1e-6));
  CHECK(all.m2 == doctest::Approx(ref.m2).epsilon(1e-3));

  // Uneven partitions combined in a tree, as the GPU reduction does, plus
  // empty parts (threads that got no element).
  const size_t cuts[] = {0, 1, 1, 37, 300, 301, 777, 1000};
  std::vector<math::Moments> parts;
  for (size_t p = 0; p + 1 < std::size(cuts); ++p) {
    math::Moments m;
    for (size_t i = cuts[p]; i < cuts[p + 1]; ++i) math::moments_push(m, v[i]);
    parts.push_back(m);
  }
  while (parts.size() > 1) {
    std::vector<math::Moments> next;
    for (size_t i = 0; i < parts.size(); i += 2)
      next.push_back(i + 1 < parts.size() ? math::moments_combine(parts[i], parts[i + 1]) : parts[i]);
    parts = next;
  }
  CHECK(parts[0].n == 1000.0f);
  CHECK(parts[0].mean == doctest::Approx(ref.mean).epsilon(1e-6));
  CHECK(parts[0].m2 == doctest::Approx(ref.m2).epsilon(1e-3));
  const math::Moments empty;
  CHECK(math::moments_combine(empty, empty).n == 0.0f);
  CHECK(math::moments_combine(empty, all).mean == all.mean);
}

TEST_CASE("norm formulas: rstd, normalize, rms rstd and apply, modulate, gated residual, group-norm apply") {
  const std::vector<float> v = random_values(45, 2, -3.0f, 5.0f);
  const Ref ref = two_pass(v, 0, v.size());
  const float rstd = math::norm_rstd(static_cast<float>(ref.m2), 45.0f, 1e-5f);
  CHECK(rstd == doctest::Approx(1.0 / std::sqrt(ref.m2 / 45.0 + 1e-5)).epsilon(1e-6));
  const float mean = static_cast<float>(ref.mean);
  for (float x : v) {
    const double xhat = (x - ref.mean) / std::sqrt(ref.m2 / 45.0 + 1e-5);
    CHECK(math::normalize(x, mean, rstd) == doctest::Approx(xhat).epsilon(1e-5));
    CHECK(math::modulate(math::normalize(x, mean, rstd), 0.25f, -0.5f) ==
          doctest::Approx(xhat * 0.5 + 0.25).epsilon(1e-5));
    CHECK(math::gated_residual(x, 0.3f, -2.0f) == doctest::Approx(x - 0.6).epsilon(1e-6));
  }
  // RMSNorm: no mean subtracted, weight applied after normalising.
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  const float rms = math::rms_rstd(static_cast<float>(sq), 45.0f, 1e-6f);
  CHECK(rms == doctest::Approx(1.0 / std::sqrt(sq / 45.0 + 1e-6)).epsilon(1e-6));
  for (float x : v) CHECK(math::rms_apply(x, rms, 1.5f) == doctest::Approx(1.5 * x / std::sqrt(sq / 45.0 + 1e-6)));
  // Split mean: x - (hi + lo) is accurate where x - hi alone is not.
  const double mean_d = 1000.0 + 1e-5;
  const float hi = static_cast<float>(mean_d), lo = static_cast<float>(mean_d - hi);
  CHECK(math::group_norm_apply(1000.5f, hi, lo, 2.0f, 1.0f) == doctest::Approx((1000.5 - mean_d) * 2.0 + 1.0));
}

TEST_CASE("online softmax over key chunks equals the softmax of the whole row") {
  const std::vector<float> s = random_values(300, 3, -8.0f, 8.0f);
  const std::vector<float> val = random_values(300, 4, -1.0f, 1.0f);
  double m = -1e300, sum = 0, dot = 0;
  for (float x : s) m = std::max(m, static_cast<double>(x));
  for (size_t j = 0; j < s.size(); ++j) {
    sum += std::exp(s[j] - m);
    dot += std::exp(s[j] - m) * val[j];
  }
  const double ref_out = dot / sum, ref_lse = m + std::log(sum);

  // Chunks of uneven sizes, the first starting from max = -inf as the kernels do.
  float row_max = -std::numeric_limits<float>::infinity(), row_sum = 0, acc = 0;
  const size_t cuts[] = {0, 7, 64, 65, 200, 300};
  for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
    float chunk_max = row_max;
    for (size_t j = cuts[c]; j < cuts[c + 1]; ++j) chunk_max = std::max(chunk_max, s[j]);
    const float corr = math::softmax_rescale(row_max, chunk_max);
    row_sum *= corr;
    acc *= corr;
    row_max = chunk_max;
    for (size_t j = cuts[c]; j < cuts[c + 1]; ++j) {
      const float p = math::softmax_weight(s[j], row_max);
      row_sum += p;
      acc += p * val[j];
    }
  }
  CHECK(acc / row_sum == doctest::Approx(ref_out).epsilon(1e-5));
  CHECK(math::softmax_lse(row_max, row_sum) == doctest::Approx(ref_lse).epsilon(1e-6));
  CHECK(math::softmax_rescale(-std::numeric_limits<float>::infinity(), 3.0f) < 1e-37f);
}

TEST_CASE("lse_merge of two key sets equals the softmax over their union") {
  const std::vector<float> s = random_values(50, 5, -6.0f, 6.0f);
  const std::vector<float> val = random_values(50, 6, -1.0f, 1.0f);
  auto part = [&](size_t b, size_t e, double& out, double& lse) {
    double m = -1e300, sum = 0, dot = 0;
    for (size_t j = b; j < e; ++j) m = std::max(m, static_cast<double>(s[j]));
    for (size_t j = b; j < e; ++j) {
      sum += std::exp(s[j] - m);
      dot += std::exp(s[j] - m) * val[j];
    }
    out = dot / sum;
    lse = m + std::log(sum);
  };
  double o1, l1, o2, l2, o, l;
  part(0, 13, o1, l1);
  part(13, 50, o2, l2);
  part(0, 50, o, l);
  const math::LseMerge w = math::lse_merge(static_cast<float>(l1), static_cast<float>(l2));
  CHECK(w.w1 + w.w2 == doctest::Approx(1.0));
  CHECK(w.lse == doctest::Approx(l).epsilon(1e-6));
  CHECK(math::lse_merge_value(w, static_cast<float>(o1), static_cast<float>(o2)) == doctest::Approx(o).epsilon(1e-5));
  // Order does not matter; two empty sets stay finite (the first result kept).
  const math::LseMerge w2 = math::lse_merge(static_cast<float>(l2), static_cast<float>(l1));
  CHECK(w2.lse == doctest::Approx(w.lse));
  const float ninf = -std::numeric_limits<float>::infinity();
  const math::LseMerge none = math::lse_merge(ninf, ninf);
  CHECK(none.w1 == 1.0f);
  CHECK(none.w2 == 0.0f);
}

TEST_CASE("timestep frequencies follow diffusers' formula") {
  const int64_t half = 128;
  for (float shift : {0.0f, 1.0f})
    for (float max_period : {10000.0f, 500.0f}) {
      const float nlp = math::timestep_neg_log_period(max_period);
      CHECK(nlp == static_cast<float>(-std::log(static_cast<double>(max_period))));
      for (int64_t i = 0; i < half; ++i) {
        const double ref = std::exp(-std::log(static_cast<double>(max_period)) * i / (half - shift));
        CHECK(math::timestep_freq(i, half, shift, nlp) == doctest::Approx(ref).epsilon(1e-6));
      }
    }
  CHECK(math::timestep_arg(999.0f, 0.5f, 2.0f) == 999.0f);
}
