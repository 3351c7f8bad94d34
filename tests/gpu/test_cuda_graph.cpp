// CUDA Graphs capture and replay (kernels/cuda/cuda_graph.h) on the device:
// a small forward (cuBLASLt linear with GELU-bias, then a second linear)
// into fixed buffers, run through GraphRunner: eager during warm-up, then
// captured and replayed, each result equal to the eager one; new inputs
// written into the same buffers show up in a replay; other buffers mean a
// new capture; a forward that synchronises inside the capture fails it and
// runs eagerly. The bookkeeping itself is tested on the CPU
// (tests/cuda_host/test_graph_plan.cpp).
#include <doctest/doctest.h>

#include "gpu/gpu_test_helpers.h"
#include "kernels/cuda/cuda_graph.h"
#include "ops/cpu/cpu_ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

TEST_CASE("GraphRunner: warm-up, capture, replay of a two-linear forward, new inputs seen by replays") {
  const cuda::DType t = cuda::DType::kBF16;
  const int64_t m = 64, k = 96, n = 192;
  Tensor x = gputest::rounded(random_tensor({m, k}, 31), t);
  Tensor w1 = gputest::rounded(random_tensor({n, k}, 32, -0.2f, 0.2f), t);
  Tensor b1 = gputest::rounded(random_tensor({n}, 33), t);
  Tensor w2 = gputest::rounded(random_tensor({k, n}, 34, -0.2f, 0.2f), t);
  DeviceTensor dx(x, t), dw1(w1, t), db1(b1, t), dw2(w2, t), dh(m * n, t), dy(m * k, t);
  auto forward = [&] {
    cuda::linear(dx.data(), dw1.data(), db1.data(), dh.data(), m, n, k, n, t, true);
    cuda::linear(dh.data(), dw2.data(), nullptr, dy.data(), m, k, n, k, t, false);
  };
  forward();  // plans built outside the graph
  const Tensor eager = dy.to_host({m, k});

  cuda::GraphRunner runner({/*warmup=*/1, /*max_graphs=*/4});
  const cuda::GraphKey key{{m, k, n}, 0};
  const uint64_t io = reinterpret_cast<uintptr_t>(dx.data()) ^ reinterpret_cast<uintptr_t>(dy.data());
  CHECK(runner.run(key, io, forward) == cuda::GraphAction::kEager);
  CHECK(runner.run(key, io, forward) == cuda::GraphAction::kCapture);
  CHECK(rel_l2(dy.to_host({m, k}), eager) == 0.0);
  CHECK(runner.run(key, io, forward) == cuda::GraphAction::kReplay);
  CHECK(rel_l2(dy.to_host({m, k}), eager) == 0.0);

  // New inputs in the same buffer: the replay computes with them.
  Tensor x2 = gputest::rounded(random_tensor({m, k}, 35), t);
  DeviceTensor dx2(x2, t);
  cuda::copy_on_device(dx.data(), dx2.data(), static_cast<size_t>(m * k) * cuda::dtype_size(t));
  CHECK(runner.run(key, io, forward) == cuda::GraphAction::kReplay);
  const Tensor replayed = dy.to_host({m, k});
  forward();
  CHECK(rel_l2(replayed, dy.to_host({m, k})) == 0.0);
  CHECK(runner.planner().stats().replays == 2);

  // Other fixed buffers: a new capture.
  CHECK(runner.run(key, io + 1, forward) == cuda::GraphAction::kCapture);
}

TEST_CASE("GraphRunner: a forward that cannot be captured runs eagerly, for good") {
  const cuda::DType t = cuda::DType::kF32;
  const int64_t m = 8, k = 16, n = 8;
  Tensor x = random_tensor({m, k}, 36), w = random_tensor({n, k}, 37);
  DeviceTensor dx(x, t), dw(w, t), dy(m * n, t);
  int calls = 0;
  auto forward = [&] {
    ++calls;
    cuda::linear(dx.data(), dw.data(), nullptr, dy.data(), m, n, k, n, t);
    cuda::synchronize();  // illegal while capturing
  };
  cuda::GraphRunner runner({0, 4});
  const cuda::GraphKey key{{m, k, n}, 1};
  CHECK(runner.run(key, 1, forward) == cuda::GraphAction::kEager);  // the capture failed, then eager
  CHECK(calls == 2);
  CHECK(runner.planner().stats().capture_failures == 1);
  CHECK(runner.run(key, 1, forward) == cuda::GraphAction::kEager);
  const Tensor ref = ops::cpu::linear(x, w, nullptr);
  CHECK(rel_l2(dy.to_host({m, n}), ref) < gputest::tolerance(t));
}
