#include "cli/layout_setup.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "parallel/mpi_runtime.h"
#include "util/atomic_file.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#ifdef DITGEN_WITH_NCCL
#include "parallel/nccl_communicator.h"
#endif

namespace ditgen::cli {

parallel::Layout requested_layout(const RunConfig& cfg, const parallel::Workload& work) {
  const ParallelConfig& p = cfg.parallel;
  return {p.sp, p.cp, p.tp, parallel::resolve_sp_mode(p.sp_mode, work), p.pp, p.patches, p.warmup_steps,
          p.sp_weights};
}

RankLayout setup_layout(const RunConfig& cfg, const std::string& config_path, const parallel::Workload& work,
                        Device device) {
  RankLayout r;
  r.layout = requested_layout(cfg, work);
  parallel::Communicator& world = parallel::MpiRuntime::world();
  r.world_rank = world.rank();
  parallel::validate_layout(r.layout, world.size(), work, cfg.generate.guidance_scale,
                        config_path);
  const auto tp = parallel::tp_split(r.layout, r.world_rank);
  const auto sp = parallel::sp_split(r.layout, r.world_rank);
  const auto cp = parallel::cp_split(r.layout, r.world_rank);
  const auto pp = parallel::pp_split(r.layout, r.world_rank);
  r.tp = parallel::MpiRuntime::split(world, tp.color, tp.key);
  r.sp = parallel::MpiRuntime::split(world, sp.color, sp.key);
  r.cp = parallel::MpiRuntime::split(world, cp.color, cp.key);
  r.pp = parallel::MpiRuntime::split(world, pp.color, pp.key);
#ifdef DITGEN_WITH_NCCL
  if (device == Device::kCUDA && world.size() > 1) {
    // Same order on every rank: tp, sp, then pp (construction is collective).
    r.tp_mpi = std::move(r.tp);
    r.sp_mpi = std::move(r.sp);
    r.pp_mpi = std::move(r.pp);
    r.tp = parallel::make_nccl_communicator(*r.tp_mpi);
    r.sp = parallel::make_nccl_communicator(*r.sp_mpi);
    r.pp = parallel::make_nccl_communicator(*r.pp_mpi);
    r.nccl = true;
  }
#else
  (void)device;
#endif
  r.run.shard.tp = r.tp.get();
  r.run.shard.sp = r.sp.get();
  r.run.shard.mode = r.layout.sp_mode;
  r.run.shard.pp = r.pp.get();
  r.run.shard.sp_split = r.layout.sp_split();
  r.run.shard.pipeline = {r.layout.pipeline_patches(), r.layout.warmup_steps, r.layout.stage_split()};
  r.run.cp = r.cp.get();
  r.run.output_rank = r.world_rank == 0;
  return r;
}

void inject_test_failure(int world_rank) {
  if (const char* pause = std::getenv("DITGEN_TEST_PAUSE_AFTER_LOAD")) {
    const double seconds = std::strtod(pause, nullptr);
    if (seconds > 0) {
      std::fprintf(stderr, "ditgen: test: weights loaded, pausing\n");
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    }
  }
  const char* v = std::getenv("DITGEN_TEST_FAIL_RANK");
  if (v && *v && std::atoi(v) == world_rank)
    throw RuntimeFailure("injected failure on rank " + std::to_string(world_rank) + " (DITGEN_TEST_FAIL_RANK)");
}

void inject_test_kill(int world_rank, int64_t steps_done) {
  const char* v = std::getenv("DITGEN_TEST_KILL_AT_STEP");
  if (!v || !*v) return;
  int rank = -1;
  long long step = -1;
  if (std::sscanf(v, "%d:%lld", &rank, &step) == 2 && rank == world_rank && step - 1 == steps_done) {
    std::fprintf(stderr, "rank %d: killing itself at step %lld (DITGEN_TEST_KILL_AT_STEP)\n", rank, step);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
}

void write_test_comm_stats(const RankLayout& layout, int64_t forwards) {
  const char* path = std::getenv("DITGEN_TEST_COMM_STATS");
  if (!path || !*path || layout.world_rank != 0) return;
  auto sent = [](const std::unique_ptr<parallel::Communicator>& c) { return c ? c->bytes_sent() : 0; };
  const std::string json = nlohmann::json{{"tp", sent(layout.tp)},
                                          {"sp", sent(layout.sp)},
                                          {"cp", sent(layout.cp)},
                                          {"pp", sent(layout.pp)},
                                          {"forwards", forwards}}
                               .dump() +
                           "\n";
  write_file_atomic(path, json.data(), json.size());
}

}  // namespace ditgen::cli
