// make_scheduler: picks the scheduler by name or by the config's _class_name,
// after checking that the sampler fits the model's kind (diffusion or flow).
#include "sched/scheduler.h"

#include <cmath>
#include <stdexcept>

#include "sched/ddim.h"
#include "sched/dpmpp_2m.h"
#include "sched/flow_config.h"
#include "sched/flow_match_euler.h"
#include "sched/sampler.h"
#include "sched/unipc_flow.h"
#include "util/error.h"

namespace ditgen::sched {

void Scheduler::check_step_count(const std::string& path, int n, int64_t num_train_timesteps) {
  if (n < 1 || n > num_train_timesteps) {
    throw ConfigError(path + ": " + std::to_string(n) + " inference steps: must be 1.." +
                      std::to_string(num_train_timesteps) + " (num_train_timesteps)");
  }
}

void Scheduler::check_step(const Tensor& model_output, const Tensor& sample, int step_index, size_t steps,
                           std::optional<int> next_step) const {
  if (step_index < 0 || step_index >= static_cast<int>(steps)) {
    throw std::logic_error(name() + " step " + std::to_string(step_index) + " of " + std::to_string(steps) +
                           " (set_timesteps first)");
  }
  if (next_step && step_index != 0 && step_index != *next_step) {
    throw std::logic_error(name() + " steps must run in order: got " + std::to_string(step_index) +
                           ", expected " + std::to_string(*next_step));
  }
  if (model_output.shape() != sample.shape()) {
    throw std::logic_error(name() + " step: model_output " + shape_str(model_output.shape()) + " vs sample " +
                           shape_str(sample.shape()));
  }
}

bool Scheduler::needs_history(int step_index, const Tensor& history, const Tensor& sample) const {
  if (step_index == 0) return !history.defined() || history.numel() != sample.numel();
  if (history.numel() != sample.numel()) throw std::logic_error(name() + " step: sample shape changed within a run");
  return false;
}

std::vector<std::string> scheduler_names() {
  std::vector<std::string> names;
  for (const SamplerRow& row : kSamplers)
    if (row.make) names.emplace_back(row.name);
  return names;
}

std::vector<std::string> scheduler_names(SchedulerKind kind) {
  std::vector<std::string> names;
  for (const SamplerRow& row : kSamplers)
    if (row.make && row.kind == kind) names.emplace_back(row.name);
  return names;
}

std::unique_ptr<Scheduler> make_ddim(const SchedulerConfig& config, std::optional<double>) {
  // ddim on CogVideoX's own scheduler config keeps its float64 schedule
  // and SNR shift (DDIMScheduler.from_config would drop snr_shift_scale,
  // a schedule the model was not trained on): DdimScheduler's CogVideoX form.
  return std::make_unique<DdimScheduler>(config);
}
std::unique_ptr<Scheduler> make_dpmpp_2m(const SchedulerConfig& config, std::optional<double>) {
  return std::make_unique<DpmSolverPP2MScheduler>(config);
}
std::unique_ptr<Scheduler> make_unipc(const SchedulerConfig& config, std::optional<double> shift) {
  return std::make_unique<UniPcFlowScheduler>(config, shift);
}
std::unique_ptr<Scheduler> make_euler(const SchedulerConfig& config, std::optional<double> shift) {
  return std::make_unique<FlowMatchEulerScheduler>(config, shift);
}

SchedulerKind config_kind(const nlohmann::json& scheduler_config, const std::string& config_path,
                          std::string* reason) {
  const SchedulerConfig config(scheduler_config, config_path);
  std::string why;
  if (is_flow_match_config(config)) {
    why = "_class_name " + *config.get_optional_string("_class_name");
  } else if (config.get_string("prediction_type", "epsilon") == "flow_prediction") {
    why = "prediction_type flow_prediction";
  } else if (config.get_bool("use_flow_sigmas", false)) {
    why = "use_flow_sigmas = true";
  }
  if (reason) *reason = why;
  return why.empty() ? SchedulerKind::kDiffusion : SchedulerKind::kFlow;
}

namespace {

std::string or_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return out;
}

std::string kind_text(SchedulerKind kind) {
  return kind == SchedulerKind::kFlow ? "a flow-matching model" : "an epsilon / v-prediction model";
}

// The model's own class -> its sampler, refusing a class ditgen does not
// implement or one whose config is of the other kind (an epsilon UniPC, a
// DPM-Solver on flow sigmas).
Sampler sampler_from_class(const nlohmann::json& config, const std::string& path, SchedulerKind model_kind,
                           const std::string& kind_reason) {
  const auto it = config.find("_class_name");
  if (it == config.end()) {
    throw ModelError(path + ": no \"_class_name\": cannot tell the model's scheduler");
  }
  if (!it->is_string()) {
    throw ModelError(path + ": key \"_class_name\" must be a string, got " + it->dump());
  }
  const std::string cls = it->get<std::string>();
  const std::string fitting = "set generate.scheduler to " + or_list(scheduler_names(model_kind));
  const SamplerRow* found = nullptr;
  for (const SamplerRow& row : kSamplers)
    for (const char* c : row.classes)
      if (c && cls == c) found = &row;
  if (!found) not_supported("scheduler " + cls + " (_class_name in " + path + "); " + fitting);
  if (found->kind != model_kind) {
    const std::string how = model_kind == SchedulerKind::kFlow
                                ? " on flow sigmas (" + kind_reason + ")"
                                : " for epsilon / v-prediction (no flow_prediction, no use_flow_sigmas)";
    not_supported("scheduler " + cls + how + " in " + path + "; " + fitting);
  }
  return found->value;
}

}  // namespace

Sampler model_sampler(const nlohmann::json& scheduler_config, const std::string& config_path) {
  if (!scheduler_config.is_object()) {
    throw ModelError(config_path + ": a scheduler config must be a JSON object");
  }
  std::string kind_reason;
  const SchedulerKind model_kind = config_kind(scheduler_config, config_path, &kind_reason);
  return sampler_from_class(scheduler_config, config_path, model_kind, kind_reason);
}

std::unique_ptr<Scheduler> make_scheduler(Sampler sampler, const nlohmann::json& scheduler_config,
                                          const std::string& config_path, std::optional<double> shift) {
  if (!scheduler_config.is_object()) {
    throw ModelError(config_path + ": a scheduler config must be a JSON object");
  }
  std::string kind_reason;
  const SchedulerKind model_kind = config_kind(scheduler_config, config_path, &kind_reason);
  const SamplerRow& row = row_of(sampler == Sampler::kModelDefault
                                     ? sampler_from_class(scheduler_config, config_path, model_kind, kind_reason)
                                     : sampler);
  if (row.kind != model_kind) {
    const std::string why = model_kind == SchedulerKind::kFlow
                                ? " (" + kind_reason + ")"
                                : " (no flow_prediction, no use_flow_sigmas, not a FlowMatch class)";
    throw ConfigError(std::string("generate.scheduler = ") + row.name + " is a sampler for " +
                      kind_text(row.kind) + ", but " + config_path + " belongs to " + kind_text(model_kind) + why +
                      ": use " + or_list(scheduler_names(model_kind)));
  }
  if (shift && model_kind != SchedulerKind::kFlow) {
    throw ConfigError("generate.shift applies to the flow-matching samplers (" +
                      or_list(scheduler_names(SchedulerKind::kFlow)) + "), not to " + row.name + " on " +
                      config_path);
  }
  return row.make(SchedulerConfig(scheduler_config, config_path), shift);
}

}  // namespace ditgen::sched
