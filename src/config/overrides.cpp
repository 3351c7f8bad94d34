// See overrides.h.
#include "config/overrides.h"

#include "config/schema.h"
#include "util/error.h"

namespace ditgen::config {
namespace {

using nlohmann::json;

// Numbers, booleans, null, arrays, objects and "quoted strings" as JSON;
// anything else (out/dit.png, ddim) as the literal string, so common values
// need no shell quoting of JSON quotes.
json parse_override_value(const std::string& text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return json(text);
  return value;
}

}  // namespace

SetOverride parse_set_override(const std::string& text, const ConfigContext& context) {
  // A config file that is not UTF-8 is invalid JSON; a --set entry must not
  // bring such bytes in either (every message and to_json dumps the values).
  try {
    (void)json(text).dump();
  } catch (const json::type_error&) {
    throw ConfigError(context.file() + ": --set " +
                      json(text).dump(-1, ' ', false, json::error_handler_t::replace) + ": not valid UTF-8");
  }
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0)
    throw ConfigError(context.file() + ": --set " + text +
                      ": expected key.path=value (e.g. --set generate.steps=20)");
  SetOverride entry;
  entry.path = text.substr(0, equals);
  entry.append = entry.path.size() > 1 && entry.path.back() == '+';
  if (entry.append) entry.path.pop_back();
  entry.value = parse_override_value(text.substr(equals + 1));
  entry.text = text;
  if (const char* feature = not_built_yet(entry.path))
    throw ConfigError(context.file() + ": " + entry.path + ": not supported yet: " + feature + " (from --set " + text +
                      ")");
  if (!is_schema_path(entry.path))
    throw ConfigError(context.file() + ": " + entry.path + ": " + unknown_key_message(entry.path) +
                      " (from --set " + text + ")");
  return entry;
}

void apply_set_override(json& document, const SetOverride& entry, const ConfigContext& context) {
  json* node = &document;
  std::string walked;
  std::size_t start = 0;
  while (true) {
    const auto dot = entry.path.find('.', start);
    const std::string key = entry.path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      // `+=` appends to a list; null removes the key, so the default applies
      // (`--set output.fps=null` before writing png from an mp4 config).
      if (entry.append) {
        json& list = (*node)[key];  // null when absent
        if (list.is_null()) list = json::array();
        if (!list.is_array())
          throw ConfigError(context.file() + ": " + entry.path + ": expected a list, got " + describe_value(list) +
                            " (cannot apply " + entry.text + ")");
        list.push_back(entry.value);
      } else if (entry.value.is_null()) {
        node->erase(key);
      } else {
        (*node)[key] = entry.value;
      }
      return;
    }
    walked = join_path(walked, key);
    json& section = (*node)[key];  // creates null when absent
    if (section.is_null()) section = json::object();
    if (!section.is_object())
      throw ConfigError(context.file() + ": " + walked + ": expected an object, got " +
                        describe_value(section) + " (cannot apply --set " + entry.text + ")");
    node = &section;
    start = dot + 1;
  }
}

}  // namespace ditgen::config
