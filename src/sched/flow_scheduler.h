// What the flow-matching samplers (euler: flow_match_euler.h, unipc:
// unipc_flow.h) share: the config's num_train_timesteps T, the flow shift
// they resolved (generate.shift over the config's shift / flow_shift:
// flow_config.h), the check of an inference step count against T, and the
// schedule each leaves behind: n + 1 float32 sigmas ending in 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "sched/scheduler_config.h"

namespace ditgen::sched {

class FlowScheduler : public Scheduler {
 public:

  double shift() const { return shift_; }
  // sigmas[i] for step i, plus the final 0: n + 1 float32 values.
  const std::vector<float>& sigmas() const { return sigmas_; }

 protected:
  // Reads num_train_timesteps (ModelError naming the config when < 1).
  explicit FlowScheduler(const SchedulerConfig& config);

  std::string path_;
  int64_t num_train_timesteps_ = 1000;
  double shift_ = 1.0;          // set by the sampler's constructor, in its order of checks
  std::vector<float> sigmas_;  // set by set_timesteps
};

}  // namespace ditgen::sched
