#include "sched/flow_scheduler.h"

namespace ditgen::sched {

FlowScheduler::FlowScheduler(const SchedulerConfig& config) : path_(config.path()) {
  num_train_timesteps_ = config.get_int("num_train_timesteps", 1000);
  if (num_train_timesteps_ < 1) config.bad_value("num_train_timesteps", "must be at least 1");
}

}  // namespace ditgen::sched
