// Scheduler: the sampler of the denoising loop. set_timesteps() fixes the
// timesteps fed to the model; step() turns the model's prediction into the
// next, less noisy sample, in place.
//
// Implementations replicate diffusers (DDIMScheduler, DPMSolverMultistep-
// Scheduler) to float32 rounding, including its float32-vs-float64 choices,
// so ditgen and diffusers produce the same latents from the same noise.
// step() works elementwise on any shape (a batch of images, a CFG-doubled
// batch, a shard): per-step coefficients are precomputed scalars, and the
// update is one allocation-free loop over all elements. Both schedulers have
// diffusers' init_noise_sigma 1, so the initial noise is used unscaled.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  // fewer than requested, as in diffusers).
  const std::vector<int64_t>& timesteps() const { return timesteps_; }

  // One step: model_output (epsilon / v / sample prediction per the config's
  // prediction_type) and sample have the same shape; sample is updated in
  // place to the previous (less noisy) sample. step_index is 0..n-1 and must
  // go in order for multistep schedulers (0 starts a new run).
  virtual void step(const Tensor& model_output, int step_index, Tensor& sample) = 0;

  // stable-diffusion.cpp sampler name: "ddim" / "dpmpp_2m".
  virtual std::string name() const = 0;

 protected:
  std::vector<int64_t> timesteps_;
};

// name: "ddim", "dpmpp_2m", or "" for the model's own scheduler from the
// config's _class_name (DDIMScheduler -> ddim, DPMSolverMultistepScheduler ->
// dpmpp_2m; another class: ConfigError "not supported yet: scheduler X").
// scheduler_config is the parsed scheduler/scheduler_config.json (see
// parse_scheduler_config for diffusers' -Infinity tokens); config_path names
// it in error messages. A named scheduler is built from any class's config as
// diffusers' from_config does: keys it does not know are ignored, absent keys
// take its own defaults.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name,
                                          const nlohmann::json& scheduler_config,
                                          const std::string& config_path);

// The names make_scheduler accepts (for --help and config validation).
const std::vector<std::string>& scheduler_names();

}  // namespace ditgen::sched
