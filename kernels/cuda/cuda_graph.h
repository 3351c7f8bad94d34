// CUDA Graphs capture and replay on stream(), driven by GraphPlanner's
// bookkeeping (graph_plan.h): GraphRunner::run(key, io, forward) runs
// `forward` eagerly during its key's warm-up, captures it once
// (cudaStreamBeginCapture in thread-local mode, instantiate, launch) and
// replays the instantiated graph after that. A capture that fails (the
// forward synchronised, copied from pageable memory, or threw) is discarded
// and the forward runs eagerly, then and for good for that key.
//
// Off by default: enabled only with DITGEN_CUDA_GRAPHS=1 (cuda_graphs_enabled).
// What a captured forward must respect: it enqueues work only on stream();
// it allocates nothing that outlives it, and it reads its inputs from and
// writes its outputs to buffers whose addresses are in `io` (a replay reads
// and writes exactly the addresses the capture saw); every buffer it
// allocates and frees inside stays untouched by other work between
// replays. The transformer forward does not meet the last rule yet (its
// intermediates come from the shared caching allocator), so no model uses
// this yet: docs/cuda.md says what remains. Host-only header.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <unordered_map>

#include "kernels/cuda/graph_plan.h"

namespace ditgen::cuda {

bool cuda_graphs_enabled();  // DITGEN_CUDA_GRAPHS=1, read once

class GraphRunner {
 public:
  explicit GraphRunner(GraphPolicy policy = {}) : planner_(policy) {}
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Runs forward() for `key` with fixed buffers `io`; returns what was done
  // (a failed capture returns kEager: the forward ran eagerly).
  GraphAction run(const GraphKey& key, uint64_t io, const std::function<void()>& forward);
  void invalidate_all();
  const GraphPlanner& planner() const { return planner_; }

 private:
  void destroy_released();

  GraphPlanner planner_;
  std::unordered_map<GraphKey, cudaGraphExec_t, GraphKeyHash> execs_;
};

}  // namespace ditgen::cuda
