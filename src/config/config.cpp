// load_config: the loading pipeline of config.h, stage by stage.
#include "config/config.h"

#include "config/config_context.h"
#include "config/json_file.h"
#include "config/overrides.h"
#include "config/parse_run_config.h"
#include "config/schema.h"

namespace ditgen {

RunConfig load_config(const std::string& path, const std::vector<std::string>& set_overrides) {
  config::ConfigContext context(path);
  const nlohmann::json file_document = config::read_json_file(path);
  if (!file_document.is_object())
    context.fail("", "expected a JSON object at the top level, got " + config::describe_value(file_document));

  nlohmann::json document = file_document;
  for (const auto& text : set_overrides) {
    const config::SetOverride entry = config::parse_set_override(text, context);
    config::apply_set_override(document, entry, context);
    context.note_override(entry.path, entry.text);
  }

  config::reject_unknown_keys(document, context);
  RunConfig run = config::parse_run_config(document, context);
  run.source_file = path;
  run.source_json = file_document;
  run.overrides = set_overrides;
  return run;
}

}  // namespace ditgen
