#include "pipeline/class_pipeline.h"

#include <algorithm>
#include <cstring>

#include "sched/noise.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::pipeline {

ClassPipeline::ClassPipeline(ModelParts parts) : Pipeline(std::move(parts)), id2label_(parts_.dir.id2label()) {
  if (parts_.spec->conditioning() != models::Conditioning::kClassLabels)
    throw std::logic_error("ClassPipeline for a model that is not class-conditional");
}

ClassPipeline ClassPipeline::load(const std::string& model_dir, const ParallelRun& par,
                                  const models::Placement& place) {
  ClassPipeline p(ModelParts::read(model_dir));
  p.load_weights(par, place);
  return p;
}

void ClassPipeline::load_weights(const ParallelRun& par, const models::Placement& place) {
  par_ = par;
  transformer_ = parts_.spec->load(io::WeightStore::open_dir(parts_.dir.part_dir("transformer")), par.shard, place);
  load_vae(par, place);
}

Request ClassPipeline::prepare(const GenerateConfig& g, const std::string& where) const {
  if (g.class_labels.empty())
    throw ConfigError(where + ": generate.class_labels: a " + std::string(parts_.spec->family()) +
                      " model needs class labels");
  Request r;
  r.latent_shape = parts_.spec->latent_shape(g.height, g.width, parts_.vae.scale_factor(),
                                             where + ": generate.height/width");
  for (size_t i = 0; i < g.class_labels.size(); ++i) {
    const auto& l = g.class_labels[i];
    std::variant<int64_t, std::string> label;
    if (const int* id = std::get_if<int>(&l)) label = static_cast<int64_t>(*id);
    else label = std::get<std::string>(l);
    r.labels.push_back(label_id(label, where + ": generate.class_labels[" + std::to_string(i) + "]"));
    r.captions.push_back(label_name(r.labels.back()));
  }
  r.seed = g.seed;
  r.steps = g.steps;
  r.guidance_scale = static_cast<float>(g.guidance_scale);
  r.scheduler = g.scheduler;
  r.batch_size = g.batch_size;
  // The step count against the scheduler (e.g. more steps than training timesteps).
  sched::make_scheduler(r.scheduler, parts_.scheduler_config, parts_.dir.part_config_path("scheduler"))
      ->set_timesteps(r.steps);
  return r;
}

int64_t resolve_class_label(const std::variant<int64_t, std::string>& label,
                            const std::vector<std::pair<int, std::string>>& id2label, int64_t classes,
                            const std::string& field) {
  if (const auto* id = std::get_if<int64_t>(&label)) {
    if (*id < 0 || *id >= classes)
      throw ConfigError(field + ": class " + std::to_string(*id) + " is outside [0, " + std::to_string(classes - 1) +
                        "] for this model");
    return *id;
  }
  const std::string& name = std::get<std::string>(label);
  // As DiTPipeline.get_label_ids: each id2label value may list several
  // comma-separated names ("tench, Tinca tinca"); any of them matches.
  // A name listed under several ids (ImageNet's "crane": 134 and 517) maps
  // to the last, as DiTPipeline's dict built in id order does.
  std::optional<int64_t> found;
  for (const auto& [id, names] : id2label) {
    size_t start = 0;
    while (start <= names.size()) {
      size_t comma = names.find(',', start);
      std::string part = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      part.erase(0, part.find_first_not_of(' '));
      part.erase(part.find_last_not_of(' ') + 1);
      if (part == name) found = id;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (found) return *found;
  std::string hint = id2label.empty() ? " (the model's model_index.json has no id2label; use class numbers)"
                                      : " (not in the model's id2label; e.g. '" + id2label.front().second + "')";
  throw ConfigError(field + ": unknown class name '" + name + "'" + hint);
}

int64_t ClassPipeline::label_id(const std::variant<int64_t, std::string>& label, const std::string& field) const {
  return resolve_class_label(label, id2label_, parts_.spec->num_classes(), field);
}

std::string ClassPipeline::label_name(int64_t id) const {
  for (const auto& [i, names] : id2label_)
    if (i == id) return names;
  return std::to_string(id);
}

Shape ClassPipeline::latent_shape() const { return parts_.spec->latent_shape(0, 0, parts_.vae.scale_factor(), ""); }

Conditions ClassPipeline::condition(const Request& req) const {
  for (size_t i = 0; i < req.labels.size(); ++i)
    label_id(req.labels[i], "request label " + std::to_string(i));  // throws for an id outside the model
  return {req.labels};
}

Tensor ClassPipeline::denoise(const Request& req, const Conditions& cond, const StepCallback& on_step,
                              PabSummary* pab_summary) const {
  if (!transformer_) throw std::logic_error("ClassPipeline::denoise before load_weights");
  const models::TransformerSpec& spec = *parts_.spec;
  const Shape one = req.latent_shape.empty() ? latent_shape() : req.latent_shape;
  const int64_t per_image = shape_numel(one);
  const int64_t outputs = static_cast<int64_t>(cond.class_labels.size());
  const int64_t channels = spec.in_channels(), null_class = spec.num_classes();
  if (req.init_noise) {
    Shape want = {outputs, one[0], one[1], one[2]};
    if (req.init_noise->shape() != want)
      throw ConfigError("--init-noise: tensor 'noise' has shape " + shape_str(req.init_noise->shape()) +
                        ", expected " + shape_str(want) + " (outputs, C, h, w)");
  }
  const bool cfg_guidance = req.guidance_scale > 1.0f;
  const bool cfg_split = par_.cp && par_.cp->size() == 2;  // each cp rank runs one CFG half
  if (cfg_split && !cfg_guidance)
    throw ConfigError("parallel.cp = 2 needs guidance_scale > 1 (got " + std::to_string(req.guidance_scale) + ")");
  const bool uncond_half = cfg_split && par_.cp->rank() == 1;
  const int64_t batch_size = std::max(1, req.batch_size);
  const int batches = static_cast<int>((outputs + batch_size - 1) / batch_size);

  Tensor result = Tensor::empty({outputs, one[0], one[1], one[2]});
  for (int bi = 0; bi < batches; ++bi) {
    const int64_t first = bi * batch_size, count = std::min(batch_size, outputs - first);
    // This batch's starting noise: drawn per output with seed + index.
    Tensor latents = req.init_noise ? req.init_noise->slice0(first, first + count).clone()
                                    : sched::gaussian_noise(one, count, req.seed + static_cast<uint64_t>(first));
    auto scheduler = sched::make_scheduler(req.scheduler, parts_.scheduler_config, parts_.dir.part_config_path("scheduler"));
    scheduler->set_timesteps(req.steps);
    const auto& timesteps = scheduler->timesteps();

    // Model batch: [cond; uncond] with the null class when guided, or this
    // rank's half of it under cp.
    std::vector<int64_t> labels(cond.class_labels.begin() + first, cond.class_labels.begin() + first + count);
    if (uncond_half) labels.assign(count, null_class);
    if (cfg_guidance && !cfg_split) labels.insert(labels.end(), count, null_class);
    const int64_t model_batch = static_cast<int64_t>(labels.size());
    const int64_t copies = model_batch / count;
    Tensor model_in = Tensor::empty({model_batch, one[0], one[1], one[2]});
    Tensor eps = Tensor::empty({count, one[0], one[1], one[2]});
    const int64_t hw = one[1] * one[2];
    const int64_t n = channels * hw;                    // eps values per sample
    const int64_t out_stride = spec.out_channels() * hw;  // per-sample stride of the model output
    Tensor halves = Tensor::empty({2, count, n});       // cp: [cond, uncond] eps
    // One PAB cache per generation: the count starts at 0, and the CFG
    // halves (one forward here, or the two cp ranks) share each step.
    std::optional<pab::BroadcastCache> pab;
    if (req.pab.enabled() || req.pab_analysis) {
      pab.emplace(req.pab, static_cast<int>(spec.num_layers()));
      pab->set_recorder(req.pab_analysis);
    }

    for (size_t s = 0; s < timesteps.size(); ++s) {
      for (int64_t c = 0; c < copies; ++c)
        std::memcpy(model_in.data() + c * count * per_image, latents.data(), latents.nbytes());
      std::vector<float> t(model_batch, static_cast<float>(timesteps[s]));
      if (pab)
        pab->begin_step(static_cast<double>(timesteps[s]),
                        s + 1 < timesteps.size() ? std::optional<double>(static_cast<double>(timesteps[s + 1]))
                                                 : std::nullopt);
      models::ForwardArgs args;
      args.latents = &model_in;
      args.timesteps = std::move(t);
      args.class_labels = labels;
      args.pab = pab ? &*pab : nullptr;
      Tensor out = transformer_->forward(args);  // (model_batch, out_C, h, w)
      profile::ScopedTimer timer("guidance+scheduler");
      // eps = the first in_channels channels (learned sigma dropped).
      const float* cond_eps = out.data();
      const float* uncond_eps = cfg_guidance ? out.data() + count * out_stride : nullptr;
      int64_t stride = out_stride;
      if (cfg_split) {  // exchange halves with the cp peer
        Tensor mine = Tensor::empty({count, n});
        for (int64_t i = 0; i < count; ++i)
          std::memcpy(mine.data() + i * n, out.data() + i * out_stride, n * sizeof(float));
        par_.cp->all_gather(mine.data(), mine.numel(), halves.data());
        cond_eps = halves.data();
        uncond_eps = halves.data() + count * n;
        stride = n;
      }
      const float g = req.guidance_scale;
      for (int64_t i = 0; i < count; ++i) {
        const float* cond = cond_eps + i * stride;
        float* e = eps.data() + i * per_image;
        if (cfg_guidance) {
          const float* uncond = uncond_eps + i * stride;
          for (int64_t j = 0; j < n; ++j) e[j] = uncond[j] + g * (cond[j] - uncond[j]);
        } else {
          std::memcpy(e, cond, n * sizeof(float));
        }
      }
      scheduler->step(eps, static_cast<int>(s), latents);
      if (on_step) on_step(static_cast<int>(s), static_cast<int>(timesteps.size()), bi, batches);
    }
    if (pab && pab_summary) {
      pab::accumulate(pab_summary->kinds, *pab);
      pab_summary->cache_peak_bytes = std::max(pab_summary->cache_peak_bytes, pab->cache_peak_bytes());
    }
    if (pab) pab->release();
    std::memcpy(result.data() + first * per_image, latents.data(), latents.nbytes());
  }
  return result;
}

}  // namespace ditgen::pipeline
