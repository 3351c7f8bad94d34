// One batch of outputs denoised from its starting noise to its final
// latents: the denoising loop's per-batch state and its steps.
//
// A Generation owns what lives for one batch and no longer: the latents
// (Philox noise per output with seed + i, or --init-noise), the scheduler
// with its timesteps, the model batch of CFG halves, Pyramid Attention
// Broadcast's cache (its count starts at 0 per generation), PipeFusion's
// stale keys and values, the step cache with its decisions, and the
// expert the last step ran. step(s) is one denoising step: each
// component's begin-of-step, the step's denoiser (expert and guidance),
// the forward, the CFG combination and the scheduler step. What every
// batch of a run shares (the model, the request, CFG, the layout) is the
// GenerationSetup, built once by Pipeline::denoise_loop.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "pab/broadcast.h"
#include "pab/step_cache.h"
#include "parallel/patch_pipeline.h"
#include "pipeline/cfg_combiner.h"
#include "pipeline/pipeline.h"
#include "sched/scheduler.h"

namespace ditgen::pipeline {

// What every batch of one run shares; all pointers outlive the generations.
struct GenerationSetup {
  const ModelParts* parts = nullptr;   // the transformer's spec, the scheduler config
  const Request* req = nullptr;
  const ParallelRun* par = nullptr;    // PipeFusion's stages, the cp pair
  const CfgCombiner* cfg = nullptr;
  const DenoiserForStep* denoiser = nullptr;
  const ConditionBatch* condition_batch = nullptr;
  Shape one;                           // one output's latents, (C, h, w) or (C, F, h, w)
  // Image-to-video: each output's condition (pipeline/image_condition.h),
  // the run's outputs in order; null = none.
  const std::vector<ImageCondition>* images = nullptr;
};

class Generation {
 public:
  // Outputs [first, first + count) of the request.
  Generation(const GenerationSetup& setup, int64_t first, int64_t count);

  int steps() const { return static_cast<int>(timesteps_.size()); }
  // Denoising step s (0-based, in order).
  void step(int s);
  // After the last step: this batch's PAB and step-cache figures added to
  // `summary` (may be null; under cp = 2 with halves cached apart the
  // ranks exchange their decisions once here), PAB's kept outputs dropped.
  void finish(PabSummary* summary);
  // (count, ...one): the batch's latents, final after the last step.
  const Tensor& latents() const { return latents_; }

 private:
  Tensor starting_noise() const;
  void begin_step(int s);
  // The model input of this step: the latents, joined to each output's
  // image condition where there is one, once per CFG half.
  void write_model_input(int s);
  const ImageCondition* image_of(int64_t j) const;  // output first_ + j's, or null
  void record_step_cache(PabSummary* summary) const;

  const GenerationSetup& setup_;
  const int64_t first_, count_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::vector<double> timesteps_;
  Tensor latents_;   // (count, ...one)
  Tensor model_in_;  // (halves x count, C_in, ...): the latents (and image condition) once per CFG half
  Tensor eps_;       // (count, ...one): the guided noise prediction
  std::optional<pab::BroadcastCache> pab_;
  std::optional<parallel::StaleKeyValues> stale_kv_;
  std::optional<pab::StepCache> step_cache_;
  models::ForwardArgs args_;
  Tensor text_;          // the conditioning text the args point at (text-conditional)
  // expand_timesteps (TI2V): this step's timestep per token of one output
  // (every output's mask is alike). Seam: handed to the transformer once
  // ForwardArgs takes per-token timesteps (the Wan I2V transformer).
  std::vector<float> token_timesteps_;
  int last_expert_ = -1; // the expert of the last step (-1: none yet)
};

}  // namespace ditgen::pipeline
