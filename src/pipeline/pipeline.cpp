// The parts every pipeline shares: opening a model directory's configs
// through the registry, the VAE decode stage and generate(). Which pipeline
// a family gets is the table in open().
#include "pipeline/pipeline.h"

#include <algorithm>

#include "models/registry.h"
#include "pipeline/class_pipeline.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::pipeline {

models::Placement vae_placement(const models::Placement& place, const models::VaeConfig& vae) {
  // As diffusers' pipelines: a float16 VAE with force_upcast decodes in float32.
  if (place.dtype == DType::kF16 && vae.force_upcast) return {place.device, DType::kF32};
  return place;
}

ModelParts ModelParts::read(const std::string& model_dir) {
  ModelParts p{io::ModelDir::open(model_dir), nullptr, {}, {}, {}};
  const std::string t_path = p.dir.part_config_path("transformer");
  p.spec = models::transformer_spec(p.dir.part_config("transformer"), t_path);
  const std::string v_path = p.dir.part_config_path("vae");
  const nlohmann::json v_json = p.dir.part_config("vae");
  models::check_vae_family(v_json, v_path);
  p.vae = models::VaeConfig::from_json(v_json, v_path);
  if (p.vae.latent_channels != p.spec->in_channels())
    throw ModelError(v_path + ": latent_channels " + std::to_string(p.vae.latent_channels) +
                     " does not match the transformer's in_channels " + std::to_string(p.spec->in_channels()));
  // diffusers writes -Infinity into some scheduler configs: its own parser.
  const std::string s_path = p.dir.part_config_path("scheduler");
  p.scheduler_config = sched::load_scheduler_config(s_path);
  // Check the scheduler config now rather than after the weights are loaded.
  p.default_scheduler = sched::make_scheduler("", p.scheduler_config, s_path)->name();
  return p;
}

// One pipeline per conditioning kind.
std::unique_ptr<Pipeline> Pipeline::open(const std::string& model_dir) {
  ModelParts parts = ModelParts::read(model_dir);
  switch (parts.spec->conditioning()) {
    case models::Conditioning::kClassLabels: return std::make_unique<ClassPipeline>(std::move(parts));
    case models::Conditioning::kText: break;
  }
  not_supported("text-conditional pipelines (" + parts.dir.part_config_path("transformer") + ")");
}

void Pipeline::load_vae(const ParallelRun& par, const models::Placement& place) {
  if (!par.output_rank) return;
  vae_ = std::make_shared<models::VaeDecoder>(models::VaeDecoder::load(
      io::WeightStore::open_dir(parts_.dir.part_dir("vae")), parts_.vae, vae_placement(place, parts_.vae)));
}

Tensor Pipeline::decode(const Tensor& latents) const {
  if (!vae_) throw std::logic_error("Pipeline::decode on a rank that is not the output rank");
  profile::ScopedTimer timer("vae_decode");
  const float sf = vae_->config().scaling_factor;
  const int64_t n = latents.dim(0);
  Tensor frames;
  for (int64_t i = 0; i < n; ++i) {  // one at a time: the decoder's activations dominate memory
    Tensor z = latents.slice0(i, i + 1).clone();
    // The pipelines multiply by 1/scaling_factor (not a division: differs in the last bit).
    const float inv_sf = 1.0f / sf;
    for (int64_t j = 0; j < z.numel(); ++j) z[j] *= inv_sf;
    Tensor img = vae_->decode(z);  // (1, 3, H, W) in about [-1, 1]
    if (!frames.defined()) frames = Tensor::empty({n, 1, img.dim(1), img.dim(2), img.dim(3)});
    float* dst = frames.data() + i * img.numel();
    for (int64_t j = 0; j < img.numel(); ++j) dst[j] = std::clamp(img[j] / 2.0f + 0.5f, 0.0f, 1.0f);
  }
  return frames;
}

Result Pipeline::generate(const Request& req, const StepCallback& on_step) const {
  Result r;
  r.latents = sample(req, on_step, &r.pab);
  if (par_.output_rank) r.frames = decode(r.latents);
  r.scheduler = req.scheduler.empty() ? default_scheduler() : req.scheduler;
  return r;
}

}  // namespace ditgen::pipeline
