// From the config's `parallel` section to this rank's groups: validation of
// the layout against the model (config.json only, no weights) and the world
// size, then the tp / sp / cp communicators split from the world in the rank
// order of docs/design.md §4.
#pragma once
#include <memory>
#include <string>

#include "config/config.h"
#include "parallel/communicator.h"
#include "parallel/layout.h"
#include "pipeline/pipeline.h"

namespace ditgen::cli {

struct RankLayout {
  parallel::Layout layout;
  int world_rank = 0;
  std::unique_ptr<parallel::Communicator> tp, sp, cp, pp;  // owned; run points at them
  std::unique_ptr<parallel::Communicator> tp_mpi, sp_mpi, pp_mpi;  // NCCL's bootstrap groups, when tp/sp/pp are NCCL
  bool nccl = false;  // tp, sp and pp run over NCCL (CUDA device, NCCL built)
  pipeline::ParallelRun run;
};

// The layout a config asks for, its sp_mode "auto" resolved for this
// model (dsp for video models, ulysses for image models).
parallel::Layout requested_layout(const RunConfig& cfg, const parallel::Workload& work);

// ConfigError (exit 2) naming the failing product or divisibility and the
// layouts that would work for the model's workload, before any weight is loaded. On a CUDA device in
// a build with NCCL, the tp and sp groups (which move device activations)
// are NCCL communicators bootstrapped over their MPI groups; cp (host eps)
// stays MPI. Without NCCL, device tensors are staged through MPI
// (parallel/tensor_collectives.h).
RankLayout setup_layout(const RunConfig& cfg, const std::string& config_path, const parallel::Workload& work,
                        Device device = Device::kCPU);

// Test hooks after loading: DITGEN_TEST_FAIL_RANK=r makes rank r fail,
// while the others wait in a collective (the whole job must still end
// promptly); DITGEN_TEST_PAUSE_AFTER_LOAD=s makes every rank print
// "ditgen: test: weights loaded, pausing" and sleep s seconds (a test then
// changes the model files under the mapped weights).
void inject_test_failure(int world_rank);

// Test hook: DITGEN_TEST_KILL_AT_STEP=r:s makes rank r kill itself with
// SIGKILL as denoising step s (1-based, counted over the whole run)
// begins, i.e. once `steps_done` = s - 1, while the other ranks go on into
// that step's collectives: a rank lost mid-run, not at load.
void inject_test_kill(int world_rank, int64_t steps_done);

// Test hook: DITGEN_TEST_COMM_STATS=FILE makes the output rank write the
// bytes it sent through its tp, sp, cp and pp groups over the run, and the
// number of transformer forwards, as JSON ({"tp": .., "sp": .., "cp": ..,
// "pp": .., "forwards": ..}), so tests can hold `plan`'s per-step figures against
// what a real run counts.
void write_test_comm_stats(const RankLayout& layout, int64_t forwards);

}  // namespace ditgen::cli
