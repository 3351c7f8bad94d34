// The CUDA Graphs bookkeeping (kernels/cuda/graph_plan.h) on the host: warm-up
// before capture, replay, re-capture on other buffers, capture failures,
// the LRU bound and invalidation, with no GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/graph_plan.h"

using namespace ditgen::cuda;

namespace {

GraphKey key(int64_t tokens, uint64_t pattern = 0) { return GraphKey{{2, tokens, 1152}, pattern}; }

bool released(GraphPlanner& p, const GraphKey& k) {
  const std::vector<GraphKey> r = p.take_released();
  return std::find(r.begin(), r.end(), k) != r.end();
}

}  // namespace

TEST_CASE("GraphPlanner: warm-up forwards run eagerly, then one capture, then replays") {
  GraphPlanner p({/*warmup=*/2, /*max_graphs=*/8});
  const GraphKey k = key(256);
  CHECK(p.plan(k, 1) == GraphAction::kEager);
  CHECK(p.plan(k, 1) == GraphAction::kEager);
  CHECK(p.plan(k, 1) == GraphAction::kCapture);
  p.captured(k, 1, true);
  CHECK(p.holds(k));
  for (int i = 0; i < 5; ++i) CHECK(p.plan(k, 1) == GraphAction::kReplay);
  CHECK(p.stats().eager == 2);
  CHECK(p.stats().captures == 1);
  CHECK(p.stats().replays == 5);
  CHECK(p.take_released().empty());
}

TEST_CASE("GraphPlanner: warm-up of zero captures the first forward") {
  GraphPlanner p({0, 8});
  CHECK(p.plan(key(16), 7) == GraphAction::kCapture);
}

TEST_CASE("GraphPlanner: shapes and PAB patterns are separate graphs, each warmed up") {
  GraphPlanner p({1, 8});
  const GraphKey computed = key(256, 0b000), broadcast = key(256, 0b101), other_shape = key(1024, 0b000);
  CHECK(computed.hash() != broadcast.hash());
  CHECK(p.plan(computed, 1) == GraphAction::kEager);
  CHECK(p.plan(broadcast, 1) == GraphAction::kEager);
  CHECK(p.plan(computed, 1) == GraphAction::kCapture);
  p.captured(computed, 1, true);
  CHECK(p.plan(broadcast, 1) == GraphAction::kCapture);
  p.captured(broadcast, 1, true);
  CHECK(p.plan(other_shape, 1) == GraphAction::kEager);
  CHECK(p.plan(computed, 1) == GraphAction::kReplay);
  CHECK(p.plan(broadcast, 1) == GraphAction::kReplay);
  CHECK(p.graphs() == 2);
}

TEST_CASE("GraphPlanner: other input / output buffers drop the graph and capture again") {
  GraphPlanner p({1, 8});
  const GraphKey k = key(64);
  p.plan(k, 10);
  REQUIRE(p.plan(k, 10) == GraphAction::kCapture);
  p.captured(k, 10, true);
  CHECK(p.plan(k, 11) == GraphAction::kCapture);  // no second warm-up
  CHECK(released(p, k));
  CHECK_FALSE(p.holds(k));
  p.captured(k, 11, true);
  CHECK(p.plan(k, 11) == GraphAction::kReplay);
  CHECK(p.plan(k, 10) == GraphAction::kCapture);
}

TEST_CASE("GraphPlanner: a failed capture leaves the key eager for good") {
  GraphPlanner p({1, 8});
  const GraphKey k = key(64);
  p.plan(k, 1);
  REQUIRE(p.plan(k, 1) == GraphAction::kCapture);
  p.captured(k, 1, false);
  for (int i = 0; i < 4; ++i) CHECK(p.plan(k, 1) == GraphAction::kEager);
  CHECK(p.stats().capture_failures == 1);
  CHECK_FALSE(p.holds(k));
  // Other keys are not affected.
  const GraphKey other = key(65);
  p.plan(other, 1);
  CHECK(p.plan(other, 1) == GraphAction::kCapture);
}

TEST_CASE("GraphPlanner: at most max_graphs held, the least recently replayed dropped") {
  GraphPlanner p({0, 2});
  const GraphKey a = key(1), b = key(2), c = key(3);
  for (const GraphKey& k : {a, b}) {
    REQUIRE(p.plan(k, 1) == GraphAction::kCapture);
    p.captured(k, 1, true);
  }
  CHECK(p.plan(a, 1) == GraphAction::kReplay);  // a is now the most recent
  REQUIRE(p.plan(c, 1) == GraphAction::kCapture);
  p.captured(c, 1, true);
  CHECK(p.graphs() == 2);
  CHECK(p.holds(a));
  CHECK(p.holds(c));
  CHECK_FALSE(p.holds(b));
  CHECK(released(p, b));
  // b comes back: captured again straight away (its warm-up is done).
  CHECK(p.plan(b, 1) == GraphAction::kCapture);
}

TEST_CASE("GraphPlanner: invalidate_all drops every graph, warm-up count and failure") {
  GraphPlanner p({1, 8});
  const GraphKey a = key(1), f = key(2);
  p.plan(a, 1);
  p.plan(a, 1);
  p.captured(a, 1, true);
  p.plan(f, 1);
  p.plan(f, 1);
  p.captured(f, 1, false);
  p.invalidate_all();
  CHECK(p.graphs() == 0);
  CHECK(released(p, a));
  CHECK(p.plan(a, 1) == GraphAction::kEager);  // warms up again
  CHECK(p.plan(f, 1) == GraphAction::kEager);
  CHECK(p.plan(f, 1) == GraphAction::kCapture);  // a fresh try after invalidation
}

TEST_CASE("graph_action_name") {
  CHECK(std::string(graph_action_name(GraphAction::kEager)) == "eager");
  CHECK(std::string(graph_action_name(GraphAction::kCapture)) == "capture");
  CHECK(std::string(graph_action_name(GraphAction::kReplay)) == "replay");
}
