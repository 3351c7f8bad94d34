// The step cache rules (pab/step_cache.h) against plain re-statements of
// their reference code: diffusers' FBCHeadBlockHook (compare with the last
// computed step's signal, compute when the ratio exceeds the threshold) and
// TeaCache's accumulator (poly1d of the ratio summed while below the
// threshold, first and last steps forced, the previous signal every step's);
// units (an output's halves together or apart) keep separate state, and the
// span's rows mix computed and kept residuals.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "pab/step_cache.h"

using namespace ditgen;

namespace {

// A (samples, 3) signal whose sample s has value v[s] in every element.
Tensor rows_of(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size()), 3});
  for (size_t s = 0; s < v.size(); ++s)
    for (int j = 0; j < 3; ++j) t.data()[s * 3 + j] = v[s];
  return t;
}

// Runs `cache` over per-step signals of one unit (one sample); returns the decisions.
std::vector<bool> drive(pab::StepCache& cache, const std::vector<float>& signal) {
  cache.begin_batch(1, {false}, false, static_cast<int>(signal.size()));
  std::vector<bool> out;
  for (size_t s = 0; s < signal.size(); ++s) {
    cache.begin_step(static_cast<int>(s), 1000.0 - s);
    const Tensor x = rows_of({signal[s]});
    std::vector<float> sums;
    if (cache.has_previous()) sums = cache.local_sums(x);
    out.push_back(cache.decide(sums, x)[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("polynomial: numpy.poly1d's order, highest power first") {
  CHECK(pab::polynomial({2, -3, 1}, 4.0) == doctest::Approx(2 * 16 - 3 * 4 + 1));
  CHECK(pab::polynomial({0, 0, 0, 1, 0}, 0.37) == doctest::Approx(0.37));
  CHECK(pab::polynomial({5}, 9.0) == 5);
}

TEST_CASE("first_block: compares with the last computed step's signal, computes above the threshold") {
  const std::vector<float> signal = {1.0f, 1.05f, 1.12f, 1.3f, 1.31f, 2.0f};
  // Reference: diffusers' hook, the previous residual replaced only on computed steps.
  std::vector<bool> want;
  double prev = -1;
  for (float v : signal) {
    const bool compute = prev < 0 || std::fabs(v - prev) / std::fabs(prev) > 0.1;
    if (compute) prev = v;
    want.push_back(compute);
  }
  pab::StepCache cache({CacheKind::kFirstBlock, 0.1, {}});
  CHECK(drive(cache, signal) == want);
  CHECK(want == std::vector<bool>{true, false, true, true, false, true});  // 1.12 against 1.0: 12% > 10%
}

TEST_CASE("teacache: the rescaled change accumulates while below the threshold, first and last steps forced") {
  const std::vector<float> signal = {1.0f, 1.02f, 1.05f, 1.06f, 1.2f, 1.21f, 1.22f, 1.3f};
  const std::vector<double> coefficients = {0, 0, 3, 1, 0.01};  // 3x^2 + x + 0.01
  const double threshold = 0.08;
  // Reference: TeaCache4Wan2.1's loop over one branch.
  std::vector<bool> want;
  double acc = 0, prev = 0;
  for (size_t s = 0; s < signal.size(); ++s) {
    bool compute = true;
    if (s == 0 || s + 1 == signal.size()) {
      acc = 0;
    } else {
      const double rel = std::fabs(signal[s] - prev) / std::fabs(prev);
      acc += 3 * rel * rel + rel + 0.01;
      if (acc < threshold) compute = false;
      else acc = 0;
    }
    prev = signal[s];  // every step's
    want.push_back(compute);
  }
  pab::StepCache cache({CacheKind::kTeaCache, threshold, coefficients});
  const std::vector<bool> got = drive(cache, signal);
  CHECK(got == want);
  int skipped = 0;
  for (bool c : want) skipped += c ? 0 : 1;
  CHECK(skipped >= 2);
  CHECK(skipped <= 5);
  CHECK(cache.stats().decisions.back().computed);  // the last step
}

TEST_CASE("units: an output's halves together sum their rows, apart each decides alone") {
  // Two outputs, both halves on this rank: samples [cond 0, cond 1, uncond 0, uncond 1].
  for (bool apart : {false, true}) {
    CAPTURE(apart);
    pab::StepCache cache({CacheKind::kFirstBlock, 0.08, {}});
    cache.begin_batch(2, {false, true}, apart, 3);
    CHECK(cache.units() == (apart ? 4 : 2));
    cache.begin_step(0, 999);
    (void)cache.decide({}, rows_of({1, 1, 1, 1}));
    cache.begin_step(1, 500);
    // cond 0 changes by 10%, uncond 0 by 0%: together 5% (below 8%), apart cond 0 computes.
    const Tensor x = rows_of({1.1f, 1.0f, 1.0f, 1.0f});
    const std::vector<bool> c = cache.decide(cache.local_sums(x), x);
    if (apart) CHECK(c == std::vector<bool>{true, false, false, false});
    else CHECK(c == std::vector<bool>{false, false});
  }
}

// (samples, 1, 3): one row of one token per sample, value v[s] everywhere.
Tensor span_rows(const std::vector<float>& v) { return rows_of(v).reshape({static_cast<int64_t>(v.size()), 1, 3}); }

TEST_CASE("span: computed units keep out - in, skipped units' rows take in + their kept residual") {
  pab::StepCache cache({CacheKind::kFirstBlock, 0.5, {}});
  cache.begin_batch(2, {false}, false, 3);
  cache.begin_step(0, 999);
  (void)cache.decide({}, rows_of({1, 1}));
  Tensor out = span_rows({5, 7});
  cache.span_computed(out, span_rows({1, 2}), {true, true}, 100);  // residuals 4 and 5
  cache.finish_step();
  cache.begin_step(1, 500);
  const Tensor x = rows_of({3, 1.1f});  // output 0 changed 200%, output 1 10%
  const std::vector<bool> c = cache.decide(cache.local_sums(x), x);
  REQUIRE(c == std::vector<bool>{true, false});
  Tensor out2 = span_rows({10, 99});
  cache.span_computed(out2, span_rows({2, 3}), c, 60);  // half the batch: 40 bytes not sent
  cache.finish_step();
  CHECK(out2.data()[0] == 10);      // computed: as run
  CHECK(out2.data()[3] == 3 + 5);   // skipped: in + kept residual
  cache.begin_step(2, 0);
  const Tensor y = rows_of({3, 1.1f});
  const std::vector<bool> c2 = cache.decide(cache.local_sums(y), y);
  REQUIRE(c2 == std::vector<bool>{false, false});
  const Tensor kept = cache.span_skipped(1, 4);
  cache.finish_step();
  CHECK(kept.data()[0] == 8);  // output 0's residual replaced at step 1: 10 - 2
  CHECK(kept.data()[3] == 5);  // output 1's kept from step 0
  CHECK(cache.stats().steps_computed == 2);
  CHECK(cache.stats().steps_skipped == 1);
  CHECK(cache.stats().comm_bytes_skipped == 40 + 100);
}

TEST_CASE("span over patches: each patch's tokens keep and take their own rows of the residual") {
  // 1 output, 2 rows (e.g. CFG halves together), 3 tokens in patches [0, 2) and [2, 3), width 1.
  pab::StepCache cache({CacheKind::kFirstBlock, 0.5, {}});
  cache.begin_batch(1, {false, true}, false, 2);
  cache.begin_step(0, 999);
  (void)cache.decide({}, rows_of({1, 1}));
  auto patch = [](std::vector<float> v, int64_t p) {
    Tensor t = Tensor::empty({2, p, 1});
    for (size_t i = 0; i < v.size(); ++i) t.data()[i] = v[i];
    return t;
  };
  Tensor a = patch({10, 11, 20, 21}, 2), b = patch({12, 22}, 1);
  cache.span_computed(a, patch({0, 0, 0, 0}, 2), {true}, 0, 0, 3);
  cache.span_computed(b, patch({2, 2}, 1), {true}, 0, 2, 3);
  cache.finish_step();
  const Tensor ka = cache.span_skipped(0, 1, 0, 2, 3), kb = cache.span_skipped(0, 1, 2, 1, 3);
  CHECK(std::vector<float>(ka.data(), ka.data() + 4) == std::vector<float>{10, 11, 20, 21});
  CHECK(std::vector<float>(kb.data(), kb.data() + 2) == std::vector<float>{10, 20});
}
