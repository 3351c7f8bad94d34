// Scheduler: the sampler of the denoising loop. set_timesteps() fixes the
// timesteps fed to the model; step() turns the model's prediction into the
// next, less noisy sample, in place.
//
// Implementations replicate diffusers (DDIMScheduler, DPMSolverMultistep-
// Scheduler, UniPCMultistepScheduler on flow sigmas, FlowMatchEuler-
// DiscreteScheduler) to float32 rounding, including its float32-vs-float64
// choices, so ditgen and diffusers produce the same latents from the same
// noise. step() works elementwise on any shape (a batch of images, a
// CFG-doubled batch, a shard): per-step coefficients are precomputed scalars,
// and the update is one allocation-free loop over all elements. Every
// scheduler here has diffusers' init_noise_sigma 1, so the initial noise is
// used unscaled.
//
// Two kinds of model, two kinds of sampler: epsilon / v-prediction models
// (DiT, PixArt, Latte) take ddim or dpmpp_2m; flow-matching models (Wan)
// take unipc or euler. make_scheduler refuses a sampler of the other kind.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/sampler.h"
#include "tensor/tensor.h"

namespace ditgen::sched {

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Fixes the timesteps for a run of num_inference_steps steps (ConfigError if
  // the count is out of range) and resets any multistep history.
  virtual void set_timesteps(int num_inference_steps) = 0;
  // The t fed to the model at each step, in order. Its size is the number of
  // steps (for DPM with lambda_min_clipped and trailing spacing it can be
  // fewer than requested, as in diffusers). double holds every value
  // diffusers feeds exactly: the integers of ddim, dpmpp_2m and unipc
  // (int64 in diffusers) and euler's float32 sigma * 1000.
  const std::vector<double>& timesteps() const { return timesteps_; }

  // One step: model_output (epsilon / v / sample prediction per the config's
  // prediction_type; the flow velocity for unipc and euler) and sample have
  // the same shape; sample is updated in place to the previous (less noisy)
  // sample. step_index is 0..n-1 and must go in order for multistep
  // schedulers (0 starts a new run).
  virtual void step(const Tensor& model_output, int step_index, Tensor& sample) = 0;

  // Which sampler of the table (sched/sampler.h) this is; its name and
  // kind are the table's.
  virtual Sampler sampler() const = 0;
  std::string name() const { return name_of(sampler()); }
  SchedulerKind kind() const { return row_of(sampler()).kind; }

 protected:
  // What step() checks first, std::logic_error headed by name() where it
  // fails: 0 <= step_index < steps (else "set_timesteps first"); for a
  // multistep scheduler (next_step given), step_index is 0 (a new run) or
  // next_step; model_output has sample's shape.
  void check_step(const Tensor& model_output, const Tensor& sample, int step_index, size_t steps,
                  std::optional<int> next_step = std::nullopt) const;
  // A multistep scheduler's history is sized like the sample: whether step
  // `step_index` must (re)allocate it (step 0, a new run, with no history of
  // the sample's size yet); std::logic_error headed by name() when a later
  // step's sample differs in size from the history's.
  bool needs_history(int step_index, const Tensor& history, const Tensor& sample) const;
  // What set_timesteps checks first: ConfigError naming the scheduler config
  // `path` for a step count n outside 1..T (num_train_timesteps).
  static void check_step_count(const std::string& path, int n, int64_t num_train_timesteps);

  std::vector<double> timesteps_;
};

// The scheduler of `sampler` (sched/sampler.h), or for kModelDefault the
// model's own: the table's row whose diffusers classes hold the config's
// _class_name (another class: ConfigError "not supported yet: scheduler
// X"). scheduler_config is the parsed scheduler/scheduler_config.json (see
// parse_scheduler_config for diffusers' -Infinity tokens); config_path names
// it in error messages.
//
// A named scheduler is built from any class's config as diffusers'
// from_config does: keys it does not know are ignored, absent keys take its
// own defaults. Between the two flow classes the model's shift carries over
// (UniPC's flow_shift is FlowMatchEuler's shift, and unipc built from a
// FlowMatch config runs on flow sigmas), as one passes them to from_config.
//
// The sampler must fit the config's kind (config_kind): ddim or dpmpp_2m on a
// flow-matching config, or unipc or euler on an epsilon / v-prediction one,
// is a ConfigError (exit 2) naming the samplers that fit.
//
// shift (generate.shift) overrides the flow samplers' flow_shift / shift; it
// must be a positive number, and on a ddim / dpmpp_2m scheduler it is a
// ConfigError.
std::unique_ptr<Scheduler> make_scheduler(Sampler sampler, const nlohmann::json& scheduler_config,
                                          const std::string& config_path,
                                          std::optional<double> shift = std::nullopt);
// The sampler make_scheduler(kModelDefault, ...) builds for this config.
Sampler model_sampler(const nlohmann::json& scheduler_config, const std::string& config_path);

// The samplers' names, in the table's order (for messages).
std::vector<std::string> scheduler_names();
// Those of one kind: {"ddim", "dpmpp_2m"} or {"unipc", "euler"}.
std::vector<std::string> scheduler_names(SchedulerKind kind);

// The kind of model a scheduler config belongs to: flow when its _class_name
// is a FlowMatch* class, its prediction_type is flow_prediction or its
// use_flow_sigmas is true; otherwise diffusion. `reason`, when given, gets
// the key that decided it ("use_flow_sigmas = true") for messages. A key of
// the wrong JSON type is a ModelError naming it.
SchedulerKind config_kind(const nlohmann::json& scheduler_config, const std::string& config_path,
                          std::string* reason = nullptr);

}  // namespace ditgen::sched
