#include "pipeline/class_pipeline.h"

#include <algorithm>
#include <cstring>

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

void ClassPipeline::load_weights(const ParallelRun& par, const models::Placement& place, DType vae_dtype) {
  StageScope stage("loading weights");
  par_ = par;
  transformer_ = parts_.load_transformer("transformer", par.shard, place);
  load_vae(par, place.device, vae_dtype);
}

Request ClassPipeline::prepare(const GenerateConfig& g, const std::string& where) const {
  if (g.class_labels.empty())
    throw ConfigError(where + ": generate.class_labels: a " + std::string(parts_.spec->family()) +
                      " model needs class labels");
  // Text settings mean nothing to a class-label model: an error naming the
  // field, as an unknown key is (CFG's unconditional half is the null class).
  const std::string family = parts_.spec->family();
  if (g.negative_prompt_given)
    throw ConfigError(where + ": generate.negative_prompt: a " + family +
                      " model is class-conditional; classifier-free guidance contrasts the class with the null "
                      "class, not with a negative prompt (remove it)");
  if (g.max_sequence_length > 0)
    throw ConfigError(where + ": generate.max_sequence_length: a " + family +
                      " model is class-conditional and reads no text (remove it)");
  Request r;
  r.latent_shape = parts_.spec->latent_shape(g.height, g.width, g.frames, parts_.vae->factors(),
                                             where + ": generate");
  for (size_t i = 0; i < g.class_labels.size(); ++i) {
    const auto& l = g.class_labels[i];
    std::variant<int64_t, std::string> label;
    if (const int* id = std::get_if<int>(&l)) label = static_cast<int64_t>(*id);
    else label = std::get<std::string>(l);
    r.labels.push_back(label_id(label, where + ": generate.class_labels[" + std::to_string(i) + "]"));
    r.captions.push_back(label_name(r.labels.back()));
  }
  set_sampling(r, g, where);
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

Shape ClassPipeline::latent_shape() const {
  return parts_.spec->latent_shape(0, 0, 0, parts_.vae->factors(), "generate");
}

Conditions ClassPipeline::condition(const Request& req) const {
  for (size_t i = 0; i < req.labels.size(); ++i)
    label_id(req.labels[i], "request label " + std::to_string(i));  // throws for an id outside the model
  Conditions c;
  c.class_labels = req.labels;
  return c;
}

Tensor ClassPipeline::denoise(const Request& req, const Conditions& cond, const StepCallback& on_step,
                              PabSummary* pab_summary) const {
  if (!transformer_) throw std::logic_error("ClassPipeline::denoise before load_weights");
  const Shape one = req.latent_shape.empty() ? latent_shape() : req.latent_shape;
  const int64_t null_class = parts_.spec->num_classes();
  // Each half's labels: the outputs' classes, or the null class (CFG's
  // unconditional half).
  auto condition_batch = [&](models::ForwardArgs& args, Tensor&, int64_t first, int64_t count,
                             const std::vector<bool>& halves) {
    args.class_labels.clear();
    for (const bool uncond : halves)
      for (int64_t i = first; i < first + count; ++i)
        args.class_labels.push_back(uncond ? null_class : cond.class_labels[static_cast<size_t>(i)]);
  };
  const DenoiserForStep denoiser = [&](double) { return StepDenoiser{transformer_.get(), req.guidance_scale}; };
  return denoise_loop(denoiser, req, one, static_cast<int64_t>(cond.class_labels.size()), condition_batch,
                      on_step, pab_summary);
}

}  // namespace ditgen::pipeline
