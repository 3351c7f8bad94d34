// Helpers shared by the config tests: a valid minimal config to start from,
// writing a config into a per-process temp directory as "run.json" (so every
// message can be checked for the file name), and capturing the message of the
// ConfigError a load throws.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "util/error.h"

namespace ditgen::test {

using nlohmann::json;

// A directory of this process's own (ctest runs test cases in parallel
// processes), removed when the process exits.
inline std::filesystem::path temp_dir() {
  struct RemovedAtExit {
    std::filesystem::path path;
    ~RemovedAtExit() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const RemovedAtExit dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("ditgen_test_config_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return RemovedAtExit{d};
  }();
  return dir.path;
}

// Writes `text` to TMP/name and returns the path.
inline std::string write_file(const std::string& text, const std::string& name = "run.json") {
  const auto path = temp_dir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path.string();
}

inline std::string write_config(const json& document, const std::string& name = "run.json") {
  return write_file(document.dump(2), name);
}

// The smallest valid config: everything else takes its default.
inline json minimal_config() {
  return {{"model", {{"path", "models/DiT-XL-2-256"}}},
          {"generate", {{"class_labels", {207, "umbrella"}}}},
          {"output", {{"path", "out/dit.png"}}}};
}

// `document` with the value at dotted `path` replaced (sections created).
inline json with(json document, const std::string& path, const json& value) {
  std::string pointer = "/" + path;
  for (auto& c : pointer)
    if (c == '.') c = '/';
  document[json::json_pointer(pointer)] = value;
  return document;
}

// `document` without the key at dotted `path`.
inline json without(json document, const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) {
    document.erase(path);
  } else {
    std::string parent = "/";
    parent += path.substr(0, dot);
    for (auto& c : parent)
      if (c == '.') c = '/';
    document[json::json_pointer(parent)].erase(path.substr(dot + 1));
  }
  return document;
}

// The message of the ConfigError that loading throws; "" (and a failed
// check) when it loads.
inline std::string load_error(const std::string& config_path, const std::vector<std::string>& sets = {}) {
  try {
    load_config(config_path, sets);
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL_CHECK("expected a ConfigError loading " << config_path);
  return "";
}

inline std::string load_error(const json& document, const std::vector<std::string>& sets = {}) {
  return load_error(write_config(document), sets);
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace ditgen::test
