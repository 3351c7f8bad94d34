// What the samplers of epsilon / v / sample-prediction models (ddim:
// ddim.h, dpmpp_2m: dpmpp_2m.h) share: the scheduler config they were read
// from (named in errors), the training noise schedule (noise_schedule.h)
// and the model's prediction_type.
#pragma once
#include <string>
#include <vector>

#include "sched/noise_schedule.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"

namespace ditgen::sched {

enum class Prediction { kEpsilon, kSample, kV };
// prediction_type -> Prediction (ConfigError / not supported for others).
Prediction read_prediction_type(const SchedulerConfig& config);

class DiffusionScheduler : public Scheduler {
 public:
  const std::vector<float>& alphas_cumprod() const { return train_.alphas_cumprod; }

 protected:
  // Reads the training schedule; prediction_ is the sampler's to read, in
  // its own order of checks.
  explicit DiffusionScheduler(const SchedulerConfig& config)
      : path_(config.path()), train_(make_train_schedule(config)) {}
  // With a training schedule of the sampler's own making (CogVideoX's DDIM).
  DiffusionScheduler(const SchedulerConfig& config, TrainSchedule train)
      : path_(config.path()), train_(std::move(train)) {}

  std::string path_;
  TrainSchedule train_;
  Prediction prediction_ = Prediction::kEpsilon;
};

}  // namespace ditgen::sched
