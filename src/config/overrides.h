// --set key.path=value overrides, applied to the JSON document before
// validation, so an overridden value meets exactly the checks a value in the
// file would. The path must name a key of the schema (a typo must not create
// a key that nothing reads); missing sections on the way are created.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_context.h"

namespace ditgen::config {

struct SetOverride {
  std::string path;       // dotted schema path
  // `key.path+=value`: the value is appended to the list at path (created
  // when absent), as --lora appends to `lora`.
  bool append = false;
  nlohmann::json value;   // parsed as JSON when it parses, else the plain string
  std::string text;       // "key.path=value" as given, for messages
};

// Splits at the first '=' (a `+` before it: append). Throws ConfigError on a malformed entry or a path
// outside the schema.
SetOverride parse_set_override(const std::string& text, const ConfigContext& context);

// Writes the value into `document` (an object), creating absent sections; a
// null value removes the key instead (its default applies again).
// Throws ConfigError when a section on the way holds a non-object.
void apply_set_override(nlohmann::json& document, const SetOverride& override_entry,
                        const ConfigContext& context);

}  // namespace ditgen::config
