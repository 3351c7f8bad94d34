// JSON document (after overrides, unknown keys already rejected) -> RunConfig:
// typed reads with defaults, then the rules that tie fields together
// (required fields, class labels vs prompts, cp=2 needs CFG).
#pragma once
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/config_context.h"

namespace ditgen::config {

// Fills every settings field of RunConfig; source_* fields are left to the caller.
RunConfig parse_run_config(const nlohmann::json& document, const ConfigContext& context);

}  // namespace ditgen::config
