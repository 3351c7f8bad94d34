#include "pipeline/component_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::pipeline {

namespace fs = std::filesystem;

void check_component_file(const std::string& path, const char* field) {
  if (path.empty()) return;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ModelError(path + ": " + field + ": no such file");
  const std::string ext = fs::path(path).extension().string();
  for (const char* pickle : {".pth", ".pt", ".ckpt", ".bin"})
    if (ext == pickle)
      throw ModelError(path + ": " + field + ": a PyTorch pickle checkpoint (" + ext +
                       "), which ditgen does not read: unpickling runs code from the file; convert it to "
                       "safetensors (or GGUF) first");
}

void check_component(const std::string& file, const char* field, const std::function<void()>& check) {
  try {
    check();
  } catch (const ModelError& e) {
    const std::string message = e.what(), about_file = file + ": ";
    if (message.rfind(about_file, 0) != 0) throw;
    throw ModelError(about_file + field + ": " + message.substr(about_file.size()));
  }
}

std::string published_configs_dir() {
  std::error_code ec;
  if (const char* set = std::getenv("DITGEN_MODEL_CONFIGS"); set && *set) {
    if (!fs::is_directory(set, ec))
      throw ModelError(std::string(set) + ": DITGEN_MODEL_CONFIGS: not a folder (the published model configs)");
    return set;
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path().parent_path() / "configs" / "models";
    if (fs::is_directory(beside, ec)) return beside.string();
  }
  if (fs::is_directory(DITGEN_PUBLISHED_CONFIGS, ec)) return DITGEN_PUBLISHED_CONFIGS;
  return "";
}

PartConfig part_config(const std::string& own, const std::string& part, const std::string& file,
                       const std::string& field, const FitCheck& fits) {
  std::error_code ec;
  if (file.empty() || fs::exists(own, ec)) return {io::read_json_file(own), own, ""};
  const std::string where = file + ": " + field + ": " + own + " is missing, and ";
  const std::string dir = published_configs_dir();
  if (dir.empty())
    throw ModelError(where + "no folder of published configs was found (configs/models of ditgen's source tree; "
                             "set DITGEN_MODEL_CONFIGS to it)");
  std::vector<fs::path> candidates;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (fs::is_regular_file(entry.path() / part / "config.json", ec)) candidates.push_back(entry.path());
  std::sort(candidates.begin(), candidates.end());
  std::string why;
  for (const fs::path& model : candidates) {
    const std::string path = (model / part / "config.json").string();
    try {
      nlohmann::json config = io::read_json_file(path);
      fits(config, path);
      return {std::move(config), path,
              file + " (" + field + "): " + own + " is missing; read as " + path +
                  ", the published config whose tensor shapes the file matches"};
    } catch (const Error& e) {
      // The reason without the file's name, which every candidate's would repeat.
      std::string reason = e.what();
      if (reason.rfind(file + ": ", 0) == 0) reason = reason.substr(file.size() + 2);
      why += "; " + model.filename().string() + ": " + reason;
    }
  }
  if (candidates.empty())
    throw ModelError(where + "no published model in " + dir + " has a " + part + "/config.json");
  throw ModelError(where + "no published " + part + " config in " + dir + " fits the file (" + why.substr(2) + ")");
}

}  // namespace ditgen::pipeline
