// make_scheduler: picks the scheduler by name or by the config's _class_name.
#include "sched/scheduler.h"

#include "sched/ddim.h"
#include "sched/dpmpp_2m.h"
#include "util/error.h"

namespace ditgen::sched {

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names{"ddim", "dpmpp_2m"};
  return names;
}

namespace {

std::string name_from_class(const nlohmann::json& config, const std::string& path) {
  const auto it = config.find("_class_name");
  if (it == config.end()) {
    throw ModelError(path + ": no \"_class_name\": cannot tell the model's scheduler");
  }
  if (!it->is_string()) {
    throw ModelError(path + ": key \"_class_name\" must be a string, got " + it->dump());
  }
  const std::string cls = it->get<std::string>();
  if (cls == "DDIMScheduler") return "ddim";
  if (cls == "DPMSolverMultistepScheduler") return "dpmpp_2m";
  not_supported("scheduler " + cls + " (_class_name in " + path +
                "); set generate.scheduler to ddim or dpmpp_2m");
}

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const std::string& name,
                                          const nlohmann::json& scheduler_config,
                                          const std::string& config_path) {
  if (!scheduler_config.is_object()) {
    throw ModelError(config_path + ": a scheduler config must be a JSON object");
  }
  const std::string resolved = name.empty() ? name_from_class(scheduler_config, config_path) : name;
  const SchedulerConfig config(scheduler_config, config_path);
  if (resolved == "ddim") return std::make_unique<DdimScheduler>(config);
  if (resolved == "dpmpp_2m") return std::make_unique<DpmSolverPP2MScheduler>(config);
  not_supported("scheduler " + resolved + " (known: ddim, dpmpp_2m)");
}

}  // namespace ditgen::sched
