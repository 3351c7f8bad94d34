// See generation.h. The order of work inside a step is diffusers': the
// latents copied into each CFG half, the forward at the step's timestep,
// guidance on the eps channels, the scheduler step on the un-doubled
// latents.
#include "pipeline/generation.h"

#include <algorithm>
#include <cstring>

#include "sched/noise.h"
#include "util/profile.h"

namespace ditgen::pipeline {

namespace {

// (count, ...one)
Shape in_one(const Shape& one, int64_t count) {
  Shape s = one;
  s.insert(s.begin(), count);
  return s;
}

// Every cp rank's step cache decisions, rank 0's first: each field travels as
// a double's bytes (two floats), so the metric arrives exactly. Both ranks
// hold as many decisions (one per step and output).
std::vector<pab::StepDecision> gather_decisions(const std::vector<pab::StepDecision>& mine,
                                                parallel::Communicator& cp) {
  constexpr size_t kFields = 6, kFloats = 2 * kFields;
  std::vector<float> send(mine.size() * kFloats);
  for (size_t i = 0; i < mine.size(); ++i) {
    const pab::StepDecision& d = mine[i];
    const double f[kFields] = {static_cast<double>(d.step), d.timestep, static_cast<double>(d.output),
                               static_cast<double>(d.half), d.metric, d.computed ? 1.0 : 0.0};
    std::memcpy(send.data() + i * kFloats, f, sizeof f);
  }
  std::vector<float> recv(send.size() * static_cast<size_t>(cp.size()));
  cp.all_gather(send.data(), static_cast<int64_t>(send.size()), recv.data());
  std::vector<pab::StepDecision> all(recv.size() / kFloats);
  for (size_t i = 0; i < all.size(); ++i) {
    double f[kFields];
    std::memcpy(f, recv.data() + i * kFloats, sizeof f);
    all[i] = {static_cast<int>(f[0]), f[1], static_cast<int64_t>(f[2]), static_cast<int>(f[3]), f[4], f[5] != 0};
  }
  return all;
}

}  // namespace

Generation::Generation(const GenerationSetup& setup, int64_t first, int64_t count)
    : setup_(setup), first_(first), count_(count) {
  const Request& req = *setup.req;
  const ModelParts& parts = *setup.parts;
  const models::TransformerSpec& spec = *parts.spec;
  const std::vector<bool>& halves = setup.cfg->halves();
  latents_ = starting_noise();
  scheduler_ = sched::make_scheduler(req.scheduler, parts.scheduler_config,
                                     parts.dir.part_config_path("scheduler"), req.shift);
  scheduler_->set_timesteps(req.steps);
  timesteps_ = scheduler_->timesteps();
  Shape model_one = setup.one;
  if (const ImageCondition* image = image_of(0)) model_one[0] = model_input_channels(*image, setup.one[0]);
  model_in_ = Tensor::empty(in_one(model_one, static_cast<int64_t>(halves.size()) * count));
  eps_ = Tensor::empty(in_one(setup.one, count));
  // One PAB cache per generation: the count starts at 0, and the CFG
  // halves (one forward here, or the two cp ranks) share each step.
  if (req.pab.enabled() || req.pab_analysis) {
    pab_.emplace(req.pab, static_cast<int>(spec.num_layers()));
    pab_->set_recorder(req.pab_analysis);
  }
  // PipeFusion: the keys and values each stage keeps across this
  // generation's steps (parallel/patch_pipeline.h).
  if (setup.par->shard.pp_size() > 1) stale_kv_.emplace(setup.par->shard.pipeline.warmup_steps);
  // The step cache: one per batch, its decisions per output; the CFG
  // halves of an output decide together (summed over the cp pair) or,
  // where the family's pipeline caches them apart, each alone.
  if (req.step_cache) {
    step_cache_.emplace(*req.step_cache);
    step_cache_->begin_batch(count, halves, spec.cfg_halves_cached_apart(), steps());
    if (pab_) step_cache_->set_pab(&*pab_);  // PAB counts only the steps its layers ran
    if (setup.cfg->split() && !spec.cfg_halves_cached_apart())
      step_cache_->set_combine_halves(
          [cp = setup.par->cp](float* sums, int64_t n) { cp->all_reduce_sum(sums, n); });
  }
  (*setup.condition_batch)(args_, text_, first, count, halves);
}

Tensor Generation::starting_noise() const {
  const Request& req = *setup_.req;
  if (req.init_noise) return req.init_noise->slice0(first_, first_ + count_).clone();
  Tensor noise = Tensor::empty(in_one(setup_.one, count_));
  for (int64_t i = 0; i < count_; ++i)  // image i of a batch at seed s is image 0 at seed s + i
    noise.slice0(i, i + 1).copy_from(sched::gaussian_noise(setup_.one, 1, req.seed_of(first_ + i)));
  return noise;
}

const ImageCondition* Generation::image_of(int64_t j) const {
  return setup_.images ? &setup_.images->at(static_cast<size_t>(first_ + j)) : nullptr;
}

void Generation::write_model_input(int s) {
  const int64_t copies = model_in_.dim(0) / count_;
  if (!setup_.images) {
    for (int64_t c = 0; c < copies; ++c)
      std::memcpy(model_in_.data() + c * latents_.numel(), latents_.data(), latents_.nbytes());
    return;
  }
  const int64_t one = shape_numel(setup_.one), input_values = model_in_.numel() / model_in_.dim(0);
  for (int64_t c = 0; c < copies; ++c)
    for (int64_t j = 0; j < count_; ++j)
      pipeline::write_model_input(*image_of(j), latents_.data() + j * one, setup_.one,
                                  model_in_.data() + (c * count_ + j) * input_values);
  // diffusers' mask[0][0][:, ::2, ::2] * t (TI2V-5B's patch is 2 x 2).
  const ImageCondition& first = *image_of(0);
  if (first.mode == ConditionMode::kExpandTimesteps)
    token_timesteps_ = token_timesteps(first.first_frame_mask, static_cast<float>(timesteps_[static_cast<size_t>(s)]),
                                       2, 2);
}

void Generation::begin_step(int s) {
  const size_t i = static_cast<size_t>(s);
  write_model_input(s);
  if (pab_)
    pab_->begin_step(timesteps_[i], i + 1 < timesteps_.size() ? std::optional<double>(timesteps_[i + 1])
                                                              : std::nullopt);
  if (step_cache_) step_cache_->begin_step(s, timesteps_[i]);
  if (stale_kv_) stale_kv_->begin_step(s);
  args_.latents = &model_in_;
  args_.timesteps.assign(static_cast<size_t>(model_in_.dim(0)), static_cast<float>(timesteps_[i]));
  args_.pab = pab_ ? &*pab_ : nullptr;
  args_.step_cache = step_cache_ ? &*step_cache_ : nullptr;
  args_.stale_kv = stale_kv_ ? &*stale_kv_ : nullptr;
}

void Generation::step(int s) {
  begin_step(s);
  const StepDenoiser denoiser = (*setup_.denoiser)(timesteps_[static_cast<size_t>(s)]);
  // A two-expert model's switch (Wan 2.2 A14B): the next expert starts
  // with a step cache state of its own, as a cache hook on each
  // transformer would.
  if (step_cache_ && last_expert_ >= 0 && denoiser.expert != last_expert_)
    step_cache_->begin_batch(count_, setup_.cfg->halves(), setup_.parts->spec->cfg_halves_cached_apart(), steps());
  last_expert_ = denoiser.expert;
  const Tensor out = denoiser.model->forward(args_);  // (halves x count, out_C, ...)
  profile::ScopedTimer timer("guidance+scheduler");
  // Per output: the eps channels' values, and the model output's (a
  // learned sigma's channels follow the eps ones).
  const models::TransformerSpec& spec = *setup_.parts->spec;
  const int64_t eps_values = shape_numel(setup_.one);
  // (eps_values / the latents' channels: the values of a channel; the
  // model input may have more channels, an image condition's.)
  const int64_t out_stride = spec.out_channels() * (eps_values / setup_.one[0]);
  setup_.cfg->combine(out, count_, eps_values, out_stride, denoiser.guidance_scale, eps_);
  scheduler_->step(eps_, s, latents_);
  // expand_timesteps: after the loop the image's latent frame replaces
  // the first one once more (diffusers, after its loop).
  if (setup_.images && s + 1 == steps())
    for (int64_t j = 0; j < count_; ++j)
      replace_first_frame(*image_of(j), latents_.data() + j * eps_values, setup_.one);
}

void Generation::finish(PabSummary* summary) {
  if (pab_ && summary) {
    pab::accumulate(summary->kinds, *pab_);
    summary->cache_peak_bytes = std::max(summary->cache_peak_bytes, pab_->cache_peak_bytes());
  }
  if (pab_) pab_->release();
  if (step_cache_) record_step_cache(summary);
}

void Generation::record_step_cache(PabSummary* summary) const {
  // Halves apart over the cp pair: each rank decided its own half; the
  // summary lists both (one exchange per batch, none per step). Both
  // ranks take part in the exchange, whichever keeps the summary.
  std::vector<pab::StepDecision> decisions = step_cache_->stats().decisions;
  if (setup_.cfg->split() && setup_.parts->spec->cfg_halves_cached_apart()) {
    decisions = gather_decisions(decisions, *setup_.par->cp);  // rank 0's steps, then rank 1's
    std::stable_sort(decisions.begin(), decisions.end(),
                     [](const pab::StepDecision& x, const pab::StepDecision& y) { return x.step < y.step; });
  }
  if (!summary) return;
  pab::StepCacheStats& total = summary->step_cache;
  const pab::StepCacheStats& mine = step_cache_->stats();
  total.steps_computed += mine.steps_computed;
  total.steps_skipped += mine.steps_skipped;
  total.comm_bytes_skipped += mine.comm_bytes_skipped;
  for (pab::StepDecision d : decisions) {
    d.output += first_;
    total.decisions.push_back(d);
  }
}

}  // namespace ditgen::pipeline
