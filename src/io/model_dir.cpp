// Diffusers-layout model directories and typed access to their JSON configs.
// Every failure is a ModelError that names the file, and for a bad value the
// key, so a user can fix the file without reading code. Optional config keys
// that are absent or null (diffusers writes null for "not set") take the
// fallback; a present value of the wrong type is an error, never ignored.
#include "io/model_dir.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace ditgen::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const json& require_object(const json& cfg, const std::string& path) {
  if (!cfg.is_object()) throw ModelError(path + ": expected a JSON object, got " + std::string(cfg.type_name()));
  return cfg;
}

// The value at `key`, or nullptr when absent or null.
const json* find_value(const json& cfg, const std::string& key, const std::string& path) {
  require_object(cfg, path);
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const char* expected, const json& v) {
  throw ModelError(path + ": " + key + ": expected " + expected + ", got " + v.type_name());
}

int64_t to_int(const json& v, const std::string& key, const std::string& path) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw ModelError(path + ": " + key + ": integer " + v.dump() + " out of range");
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  // JSON does not distinguish 32 from 32.0; accept integral floats in range.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
    throw ModelError(path + ": " + key + ": expected an integer, got " + v.dump());
  }
  wrong_type(path, key, "an integer", v);
}

}  // namespace

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open: " + errno_text(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ModelError(path + ": read error");
  return ss.str();
}

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ModelError(path + ": file not found");
  if (fs::is_directory(path, ec)) throw ModelError(path + ": is a directory, expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ModelError(path + ": read error");
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw ModelError(path + ": invalid JSON: " + e.what());
  }
}

ModelDir ModelDir::open(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw ModelError(root + ": not a directory (expected a diffusers-layout model directory with model_index.json)");
  const std::string index_path = (fs::path(root) / "model_index.json").string();
  if (!fs::exists(index_path, ec))
    throw ModelError(index_path + ": file not found (not a diffusers-layout model directory)");
  ModelDir dir;
  dir.root_ = root;
  dir.model_index_ = read_json_file(index_path);
  require_object(dir.model_index_, index_path);
  return dir;
}

std::string ModelDir::part_dir(const std::string& part) const {
  const std::string dir = (fs::path(root_) / part).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ModelError(dir + ": model part directory '" + part + "' not found");
  return dir;
}

std::string ModelDir::part_config_path(const std::string& part) const {
  return (fs::path(part_dir(part)) / (part == "scheduler" ? "scheduler_config.json" : "config.json")).string();
}

json ModelDir::part_config(const std::string& part) const {
  const std::string path = part_config_path(part);
  json cfg = read_json_file(path);
  require_object(cfg, path);
  return cfg;
}

std::vector<std::pair<int, std::string>> ModelDir::id2label() const {
  const std::string path = (fs::path(root_) / "model_index.json").string();
  std::vector<std::pair<int, std::string>> out;
  auto it = model_index_.find("id2label");
  if (it == model_index_.end() || it->is_null()) return out;
  if (!it->is_object()) wrong_type(path, "id2label", "an object of \"id\": \"name\"", *it);
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    const std::string& key = entry.key();
    const std::string where = path + ": id2label." + key;
    const bool digits = !key.empty() && key.size() <= 9 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) throw ModelError(where + ": the key must be a non-negative integer id");
    if (!entry.value().is_string())
      throw ModelError(where + ": expected a string, got " + std::string(entry.value().type_name()));
    out.emplace_back(std::stoi(key), entry.value().get<std::string>());
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw ModelError(path + ": id2label: id " + std::to_string(out[i].first) + " appears twice");
  return out;
}

int64_t get_int(const json& cfg, const std::string& key, const std::string& path) {
  const json* v = find_value(cfg, key, path);
  if (!v) throw ModelError(path + ": missing key '" + key + "'");
  return to_int(*v, key, path);
}

int64_t get_int_or(const json& cfg, const std::string& key, int64_t fallback, const std::string& path) {
  const json* v = find_value(cfg, key, path);
  return v ? to_int(*v, key, path) : fallback;
}

double get_number_or(const json& cfg, const std::string& key, double fallback, const std::string& path) {
  const json* v = find_value(cfg, key, path);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(path, key, "a number", *v);
  return v->get<double>();
}

bool get_bool_or(const json& cfg, const std::string& key, bool fallback, const std::string& path) {
  const json* v = find_value(cfg, key, path);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(path, key, "a boolean", *v);
  return v->get<bool>();
}

std::string get_string_or(const json& cfg, const std::string& key, const std::string& fallback,
                          const std::string& path) {
  const json* v = find_value(cfg, key, path);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(path, key, "a string", *v);
  return v->get<std::string>();
}

}  // namespace ditgen::io
