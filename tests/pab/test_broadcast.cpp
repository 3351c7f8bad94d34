// The PAB decision rule against a table worked out by hand from docs/design.md §5.
#include <doctest/doctest.h>

#include <set>
#include <tuple>

#include "pab/broadcast.h"

using namespace ditgen;
using pab::Kind;

namespace {

// DDIM, 10 steps, DiT's scheduler config ("leading"): 900, 800, ..., 0.
const std::vector<double> kTimesteps = {900, 800, 700, 600, 500, 400, 300, 200, 100, 0};

pab::Schedule spatial_and_mlp() {
  pab::Schedule s;
  s[Kind::kSpatial] = {true, 2, 100, 800, {}};
  s[Kind::kMlp] = {true, 3, 300, 900, {1}};
  return s;
}

// Runs the rule the way a model does; returns the reused (step, block, kind).
std::set<std::tuple<int, int, Kind>> simulate(pab::BroadcastCache& cache, int blocks, int64_t* peak_entries) {
  std::set<std::tuple<int, int, Kind>> reused;
  const Tensor output = Tensor::zeros({2, 3});
  *peak_entries = 0;
  for (size_t s = 0; s < kTimesteps.size(); ++s) {
    cache.begin_step(kTimesteps[s], s + 1 < kTimesteps.size() ? std::optional<double>(kTimesteps[s + 1])
                                                               : std::nullopt);
    for (int b = 0; b < blocks; ++b)
      for (Kind k : {Kind::kSpatial, Kind::kMlp}) {
        if (cache.reuse(b, k)) {
          CHECK(cache.cached(b, k).shape() == output.shape());
          cache.reused(b, k);
          reused.insert({static_cast<int>(s), b, k});
        } else {
          cache.computed(b, k, output, 100);
        }
      }
    *peak_entries = std::max<int64_t>(*peak_entries, cache.cache_bytes() / static_cast<int64_t>(output.nbytes()));
  }
  return reused;
}

}  // namespace

TEST_CASE("PAB reuses exactly the (step, block, kind) triples worked out by hand") {
  // spatial, range 2, window (100, 800): t in the window at steps 2..7 (700..200);
  //   reused where step % 2 != 0: steps 3, 5, 7, in both blocks.
  // mlp of block 1 only, range 3, window (300, 900): steps 1..5 (800..400);
  //   reused where step % 3 != 0: 1, 2, 4, 5 (step 0, t = 900 outside the
  //   window, is computed and kept because step 1's t = 800 is inside).
  pab::BroadcastCache cache(spatial_and_mlp(), 2);
  int64_t peak = 0;
  const auto reused = simulate(cache, 2, &peak);
  const std::set<std::tuple<int, int, Kind>> expected = {
      {3, 0, Kind::kSpatial}, {5, 0, Kind::kSpatial}, {7, 0, Kind::kSpatial},
      {3, 1, Kind::kSpatial}, {5, 1, Kind::kSpatial}, {7, 1, Kind::kSpatial},
      {1, 1, Kind::kMlp},     {2, 1, Kind::kMlp},     {4, 1, Kind::kMlp},     {5, 1, Kind::kMlp}};
  CHECK(reused == expected);
  CHECK(cache.stats(Kind::kSpatial).reused == 6);
  CHECK(cache.stats(Kind::kSpatial).computed == 14);
  CHECK(cache.stats(Kind::kMlp).reused == 4);
  CHECK(cache.stats(Kind::kMlp).computed == 6);  // block 0's MLP is not broadcast: not counted
  CHECK(cache.stats(Kind::kMlp).comm_bytes_skipped == 400);
  CHECK(peak == 3);                  // two spatial outputs and block 1's MLP at once
  CHECK(cache.cache_bytes() == 0);   // nothing held once the windows are past
}

TEST_CASE("range 1 or an empty window never reuses") {
  pab::Schedule s;
  s[Kind::kSpatial] = {true, 1, 0, 1000, {}};
  s[Kind::kMlp] = {true, 4, 450, 460, {0, 1}};  // no timestep strictly inside
  pab::BroadcastCache cache(s, 2);
  int64_t peak = 0;
  CHECK(simulate(cache, 2, &peak).empty());
  CHECK(cache.stats(Kind::kSpatial).computed == 20);
  CHECK(cache.stats(Kind::kMlp).computed == 20);
}

TEST_CASE("an unconfigured schedule is off and decides nothing") {
  pab::BroadcastCache cache(pab::Schedule{}, 3);
  CHECK_FALSE(cache.schedule().enabled());
  cache.begin_step(500, 400);
  CHECK_FALSE(cache.reuse(0, Kind::kSpatial));
  cache.computed(0, Kind::kSpatial, Tensor::zeros({4}), 0);
  CHECK(cache.cache_bytes() == 0);
  CHECK(cache.stats(Kind::kSpatial).computed == 0);
}

// docs/design.md §8: a step cache's skipped span does not advance its blocks'
// count. Spatial range 2 over every step; block 1 is skipped at step 1, so
// at step 2 it has run once since step 0 (count 1: reuse) while block 0 has
// run twice (count 2: compute).
TEST_CASE("PAB counts only the steps a block ran: a step cache's skipped layers keep their count") {
  pab::Schedule s;
  s[Kind::kSpatial] = {true, 2, 0, 1000, {}};
  pab::BroadcastCache cache(s, 2);
  const Tensor output = Tensor::zeros({2, 3});
  std::vector<std::pair<int, int>> reused;  // (step, block)
  for (int step = 0; step < 4; ++step) {
    cache.begin_step(900.0 - 100 * step, 900.0 - 100 * (step + 1));
    const int blocks = step == 1 ? 1 : 2;  // step 1: block 1 skipped
    if (step == 1) cache.skipped_layers(1, 2);
    for (int b = 0; b < blocks; ++b) {
      if (cache.reuse(b, Kind::kSpatial)) {
        cache.reused(b, Kind::kSpatial);
        reused.push_back({step, b});
      } else {
        cache.computed(b, Kind::kSpatial, output, 0);
      }
    }
  }
  // block 0: counts 0, 1, 2, 3 -> reuses at steps 1 and 3; block 1: counts 0, -, 1, 2 -> reuse at step 2.
  CHECK(reused == std::vector<std::pair<int, int>>{{1, 0}, {2, 1}, {3, 0}});
}
