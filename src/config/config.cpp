// load_config: the loading pipeline of config.h, stage by stage.
#include "config/config.h"

#include <filesystem>

#include "config/command_line_rules.h"
#include "config/config_context.h"
#include "config/json_file.h"
#include "config/overrides.h"
#include "config/parse_run_config.h"
#include "config/schema.h"

namespace ditgen {
namespace {

// The config fields that name files or folders.
constexpr const char* kPathFields[][2] = {
    {"model", "path"},          {"model", "transformer"},   {"model", "transformer_2"}, {"model", "text_encoder"},
    {"model", "vae"},           {"generate", "prompt_file"}, {"generate", "image"},     {"generate", "last_image"},
    {"output", "path"}};

// A relative path written in a config file names a place beside that file,
// as in most tools' config files, so `ditgen --config /elsewhere/run.json`
// works from any folder (issue 36). Only the file's own values: paths given
// by --set, --output or --prompt-file stay relative to the current folder,
// as a shell user expects. The result is lexically normalised, so a config
// in configs/ naming "../samples/x", run as --config configs/run.json,
// reads "samples/x" exactly as before. Values that are not non-empty
// strings are left for the typed reads to report.
void resolve_paths_against(nlohmann::json& document, const std::filesystem::path& folder) {
  if (folder.empty()) return;
  for (const auto& [section, key] : kPathFields) {
    auto s = document.find(section);
    if (s == document.end() || !s->is_object()) continue;
    auto value = s->find(key);
    if (value == s->end() || !value->is_string()) continue;
    const std::filesystem::path written = value->get<std::string>();
    if (written.empty() || written.is_absolute()) continue;
    *value = (folder / written).lexically_normal().string();
  }
  // and each LoRA's file (the lora list's items)
  auto lora = document.find("lora");
  if (lora == document.end() || !lora->is_array()) return;
  for (nlohmann::json& item : *lora) {
    if (!item.is_object() || !item.contains("path") || !item["path"].is_string()) continue;
    const std::filesystem::path written = item["path"].get<std::string>();
    if (!written.empty() && !written.is_absolute()) item["path"] = (folder / written).lexically_normal().string();
  }
}

}  // namespace

RunConfig load_config(const std::string& path, const std::vector<std::string>& set_overrides,
                      const std::vector<std::string>& override_origins) {
  config::ConfigContext context(path);
  const nlohmann::json file_document = config::read_json_file(path);
  if (!file_document.is_object())
    context.fail("", "expected a JSON object at the top level, got " + config::describe_value(file_document));

  nlohmann::json document = file_document;
  resolve_paths_against(document, std::filesystem::path(path).parent_path());
  for (size_t i = 0; i < set_overrides.size(); ++i) {
    const config::SetOverride entry = config::parse_set_override(set_overrides[i], context);
    config::apply_set_override(document, entry, context);
    const bool typed = i < override_origins.size() && !override_origins[i].empty();
    context.note_override(entry.path, typed ? override_origins[i] : "--set " + entry.text);
  }

  config::reject_unknown_keys(document, context);
  std::vector<std::string> notes;
  config::apply_command_line_rules(document, file_document, context, notes);
  RunConfig run = config::parse_run_config(document, context);
  run.notes = std::move(notes);
  run.source_file = path;
  run.source_json = file_document;
  run.overrides = set_overrides;
  run.document = std::move(document);
  return run;
}

bool given_key(const RunConfig& config, const std::string& section, const std::string& key) {
  const auto s = config.document.find(section);
  return s != config.document.end() && s->is_object() && s->contains(key);
}

}  // namespace ditgen
