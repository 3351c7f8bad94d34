// The flow samplers' shared config reading (see flow_config.h).
#include "sched/flow_config.h"

#include <cmath>
#include <sstream>

#include "util/error.h"

namespace ditgen::sched {

bool is_flow_match_config(const SchedulerConfig& config) {
  const auto cls = config.get_optional_string("_class_name");
  return cls && cls->rfind("FlowMatch", 0) == 0;
}

std::string flow_shift_key(const SchedulerConfig& config) {
  return is_flow_match_config(config) ? "shift" : "flow_shift";
}

double resolve_flow_shift(const SchedulerConfig& config, std::optional<double> shift_override) {
  if (shift_override) {
    if (!(std::isfinite(*shift_override) && *shift_override > 0)) {
      std::ostringstream shown;
      shown << *shift_override;
      throw ConfigError("generate.shift = " + shown.str() + ": must be a positive number");
    }
    return *shift_override;
  }
  const std::string key = flow_shift_key(config);
  const double shift = config.get_number(key, 1.0);
  if (!(std::isfinite(shift) && shift > 0)) config.bad_value(key, "must be a positive number");
  return shift;
}

void refuse_flow_sigma_options(const SchedulerConfig& config, const std::string& who) {
  for (const char* key : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas"}) {
    if (config.get_bool(key, false)) config.unsupported(key, who + " with " + key + " = true");
  }
  if (config.get_bool("use_dynamic_shifting", false)) {
    config.unsupported("use_dynamic_shifting",
                       who + " with use_dynamic_shifting = true (a resolution-dependent shift)");
  }
  // diffusers tests it for truth: null, false and 0 leave the schedule alone.
  if (config.truthy("shift_terminal")) {
    config.unsupported("shift_terminal", who + " with shift_terminal");
  }
}

}  // namespace ditgen::sched
