// The key schema of the config file (docs/design.md §2): every valid dotted path.
// One list serves three checks: unknown keys in the file, the target of a
// --set override, and the did-you-mean suggestion for either. Types and
// ranges are not here: they live with the typed reads in parse_run_config.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_context.h"

namespace ditgen::config {

// True for a key or section of the schema ("generate", "pab.mlp.blocks").
bool is_schema_path(const std::string& dotted_path);

// True for a section, i.e. a path whose value is an object of known keys.
bool is_schema_section(const std::string& dotted_path);

// The schema path a typo most likely meant, or "" when none is plausible.
std::string suggest_schema_path(const std::string& dotted_path);

// Fails with "FILE: path: unknown key (did you mean ...?)" at the first key of
// the document that the schema does not know. Values of the wrong type (a
// string where a section belongs) are left to the typed reads.
void reject_unknown_keys(const nlohmann::json& document, const ConfigContext& context);

// For a key the design defines that this version does not build yet: what it is,
// for "not supported yet: ..." (exit 2); else null. Such keys are never
// "unknown" and never ignored.
const char* not_built_yet(const std::string& dotted_path);

// The message tail for an unknown path: "unknown key (did you mean x?)".
std::string unknown_key_message(const std::string& dotted_path);

}  // namespace ditgen::config
