// First-Block Cache through the whole pipeline on the Wan fixture
// (tests/fixtures/wan_tiny; pab/step_cache.h, models/stage.cpp): a threshold
// nothing falls under computes every step and gives the uncached latents
// bit for bit; one everything falls under skips every step after the first;
// and each output's decisions and latents are the same whatever its batch.
// Parity with diffusers' apply_first_block_cache is the next step (see
// docs/step-caches.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"

using namespace ditgen;

namespace {

// The fixture's run with 6 Euler steps and a shorter negative prompt.
pipeline::Result run(const pipeline::Pipeline& pipe, int batch, std::optional<double> threshold) {
  GenerateConfig g = testing::wan_fixture_config(sched::Sampler::kEuler, batch);
  g.negative_prompt = "low quality";
  g.steps = 6;
  pipeline::Request req = testing::fixture_request(pipe, g, "wan_tiny");
  if (threshold) req.step_cache = pab::StepCacheSettings{CacheKind::kFirstBlock, *threshold, {}};
  return pipe.generate(req);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("First-Block Cache on Wan: a threshold nothing falls under changes nothing, a huge one skips all but step 0") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  const pipeline::Result off = run(*pipe, 2, std::nullopt);
  CHECK(off.pab.step_cache.decisions.empty());

  const pipeline::Result never = run(*pipe, 2, 1e-9);
  CHECK(same_bits(never.latents, off.latents));
  CHECK(never.pab.step_cache.steps_computed == 6);
  CHECK(never.pab.step_cache.steps_skipped == 0);
  REQUIRE(never.pab.step_cache.decisions.size() == 24);  // 6 steps x 2 outputs x 2 halves (Wan: apart)
  for (const pab::StepDecision& d : never.pab.step_cache.decisions) {
    CHECK(d.computed);
    CHECK((d.step == 0) == (d.metric < 0));
  }

  const pipeline::Result always = run(*pipe, 2, 1e9);
  CHECK(always.pab.step_cache.steps_computed == 1);
  CHECK(always.pab.step_cache.steps_skipped == 5);
  for (const pab::StepDecision& d : always.pab.step_cache.decisions) CHECK(d.computed == (d.step == 0));
  CHECK_FALSE(same_bits(always.latents, off.latents));
  for (float v : always.latents.to_vector()) REQUIRE(std::isfinite(v));
}

TEST_CASE("First-Block Cache decides per output: batch 1 and batch 2 give the same decisions and latents") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  // A threshold halfway across the widest gap between the metrics the
  // probe saw, in their middle half: some steps skip, others compute.
  const pipeline::Result probe = run(*pipe, 2, 1e-9);
  std::vector<double> metrics;
  for (const pab::StepDecision& d : probe.pab.step_cache.decisions)
    if (d.metric >= 0) metrics.push_back(d.metric);
  REQUIRE(metrics.size() >= 4);
  std::sort(metrics.begin(), metrics.end());
  size_t gap = metrics.size() / 4;
  for (size_t i = gap; i + 1 < metrics.size() && i <= 3 * metrics.size() / 4; ++i)
    if (metrics[i + 1] - metrics[i] > metrics[gap + 1] - metrics[gap]) gap = i;
  const double threshold = 0.5 * (metrics[gap] + metrics[gap + 1]);
  CAPTURE(threshold);

  const pipeline::Result two = run(*pipe, 2, threshold);
  const pipeline::Result one = run(*pipe, 1, threshold);
  int skipped = 0;
  REQUIRE(two.pab.step_cache.decisions.size() == one.pab.step_cache.decisions.size());
  for (const pab::StepDecision& d : two.pab.step_cache.decisions) {
    skipped += d.computed ? 0 : 1;
    // The cached run's own metrics (after a skip they are taken against an
    // older residual than the probe's) stay clear of the threshold, so the
    // batch sizes' rounding (~1e-7) cannot decide otherwise.
    if (d.metric >= 0) CHECK(std::fabs(d.metric - threshold) > 1e-3 * threshold);
  }
  CHECK(skipped > 0);
  CHECK(skipped < static_cast<int>(two.pab.step_cache.decisions.size()) - 2);
  // Batch 1 runs output 0's steps then output 1's; batch 2 interleaves them.
  for (const pab::StepDecision& d : one.pab.step_cache.decisions) {
    bool found = false;
    for (const pab::StepDecision& e : two.pab.step_cache.decisions)
      if (e.step == d.step && e.output == d.output && e.half == d.half) {
        found = true;
        CHECK(e.computed == d.computed);
      }
    CHECK(found);
  }
  testing::check_close(one.latents, two.latents, "latents batch 1 vs 2", 1e-5);
}
