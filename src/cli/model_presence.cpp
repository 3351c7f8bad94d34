// See model_presence.h.
#include "cli/model_presence.h"

#include <cctype>
#include <filesystem>

#include "util/error.h"

namespace ditgen::cli {
namespace {

constexpr const char* kGuide = "docs/real-models.md";

// "owner/name" as the Hub spells repository ids: one slash, neither part
// empty or starting with a dot (so ./x, ../x and /x are paths).
bool looks_like_hub_id(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= text.size()) return false;
  if (text.find('/', slash + 1) != std::string::npos) return false;
  if (text[0] == '.' || text[slash + 1] == '.') return false;
  for (const char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  return true;
}

bool is_folder(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// model.path as the command line or the file wrote it.
std::string written_model_path(const RunConfig& cfg) {
  for (const std::string& entry : cfg.overrides)
    if (entry.rfind("model.path=", 0) == 0 || entry.rfind("model=", 0) == 0) return cfg.model.path;
  const auto model = cfg.source_json.find("model");
  if (model != cfg.source_json.end() && model->is_object())
    if (const auto path = model->find("path"); path != model->end() && path->is_string())
      return path->get<std::string>();
  return cfg.model.path;
}

[[noreturn]] void hub_id_given(const std::string& id, const std::string& where) {
  const std::string name = id.substr(id.find('/') + 1);
  throw ModelError(id + ": " + where + " names no folder here; it looks like a Hugging Face Hub id, and ditgen reads "
                   "a model folder, never the network: download it first (huggingface-cli download " + id +
                   " --local-dir models/" + name + ") and give that folder (" + kGuide + ")");
}

}  // namespace

void require_model_folder(const RunConfig& cfg, const std::string& config_path) {
  const std::string& path = cfg.model.path;
  if (is_folder(path)) return;
  // The path as the user wrote it: a file's relative path was read beside
  // the file (config.h), which hides a Hub id written there.
  const std::string written = written_model_path(cfg);
  const std::string where = "model.path of " + config_path;
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    throw ModelError(path + ": " + where + " is a file, not a model folder (a diffusers-layout folder: "
                     "model_index.json, transformer/, vae/, ...; " + kGuide + ")");
  if (!cfg.model.source.empty())
    throw ModelError(path + ": the model is not there (" + where + "): download " + cfg.model.source +
                     " (model.source) into it first; " + kGuide + " gives the command, the size on disk and the "
                     "memory it needs");
  if (looks_like_hub_id(written)) hub_id_given(written, where);
  throw ModelError(path + ": the model is not there (" + where + ": no such folder); ditgen reads a "
                   "diffusers-layout model folder (model_index.json, transformer/, vae/, ...): " + kGuide +
                   " shows how to download one");
}

void require_model_folder(const std::string& folder, const std::string& option) {
  if (is_folder(folder)) return;
  std::error_code ec;
  if (!std::filesystem::exists(folder, ec) && looks_like_hub_id(folder)) hub_id_given(folder, option);
}

}  // namespace ditgen::cli
