// GraphRunner (cuda_graph.h): the capture and replay of a planned forward.
#include "kernels/cuda/cuda_graph.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"

namespace ditgen::cuda {

bool cuda_graphs_enabled() {
  static const bool on = env_switched_on("DITGEN_CUDA_GRAPHS");
  return on;
}

GraphRunner::~GraphRunner() {
  for (auto& [key, exec] : execs_) cudaGraphExecDestroy(exec);
}

void GraphRunner::destroy_released() {
  for (const GraphKey& key : planner_.take_released()) {
    auto it = execs_.find(key);
    if (it == execs_.end()) continue;
    cudaGraphExecDestroy(it->second);
    execs_.erase(it);
  }
}

void GraphRunner::invalidate_all() {
  planner_.invalidate_all();
  destroy_released();
}

GraphAction GraphRunner::run(const GraphKey& key, uint64_t io, const std::function<void()>& forward) {
  const GraphAction action = planner_.plan(key, io);
  destroy_released();
  if (action == GraphAction::kEager) {
    forward();
    return action;
  }
  if (action == GraphAction::kReplay) {
    DITGEN_CUDA_CHECK(cudaGraphLaunch(execs_.at(key), stream()));
    return action;
  }
  // Capture: everything forward() enqueues on stream() is recorded, not run.
  DITGEN_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
  bool threw = false;
  try {
    forward();
  } catch (...) {
    threw = true;
  }
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(stream(), &graph);
  cudaGraphExec_t exec = nullptr;
  if (!threw && err == cudaSuccess && graph) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  const bool ok = !threw && err == cudaSuccess && exec;
  if (!ok) cudaGetLastError();  // an invalidated capture is not a sticky error: clear it
  planner_.captured(key, io, ok);
  destroy_released();
  if (!ok) {
    if (exec) cudaGraphExecDestroy(exec);
    forward();  // nothing ran during the failed capture
    return GraphAction::kEager;
  }
  execs_[key] = exec;
  DITGEN_CUDA_CHECK(cudaGraphLaunch(exec, stream()));
  return GraphAction::kCapture;
}

}  // namespace ditgen::cuda
