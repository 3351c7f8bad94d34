// SchedulerConfig: typed getters and the Python-JSON tolerant parser.
// Non-finite numbers are carried through nlohmann::json as the strings
// "-Infinity" / "Infinity" / "NaN" (it has no literal for them) and turned
// back into doubles by get_number.
#include "sched/scheduler_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace ditgen::sched {

namespace {

const char* type_name(const nlohmann::json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

std::optional<double> non_finite(const std::string& s) {
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

bool is_number_like(const nlohmann::json& v) {
  return v.is_number() || (v.is_string() && non_finite(v.get<std::string>()));
}

double to_double(const nlohmann::json& v) {
  return v.is_string() ? *non_finite(v.get<std::string>()) : v.get<double>();
}

}  // namespace

SchedulerConfig::SchedulerConfig(const nlohmann::json& json, std::string path)
    : json_(json), path_(std::move(path)) {
  if (!json_.is_object()) {
    throw ModelError(path_ + ": a scheduler config must be a JSON object, got " +
                     type_name(json_));
  }
}

const nlohmann::json* SchedulerConfig::find(const std::string& key) const {
  const auto it = json_.find(key);
  if (it == json_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool SchedulerConfig::has(const std::string& key) const { return find(key) != nullptr; }

void SchedulerConfig::wrong_type(const std::string& key, const char* expected) const {
  const auto it = json_.find(key);
  throw ModelError(path_ + ": key \"" + key + "\" must be " + expected + ", got " +
                   type_name(*it) + " " + it->dump());
}

void SchedulerConfig::bad_value(const std::string& key, const std::string& why) const {
  const auto it = json_.find(key);
  const std::string shown = it == json_.end() ? std::string("(default)") : it->dump();
  throw ConfigError(path_ + ": " + key + " = " + shown + ": " + why);
}

void SchedulerConfig::unsupported(const std::string& key, const std::string& what) const {
  not_supported(what + " (" + key + " in " + path_ + ")");
}

// Present-but-null counts as wrong type for keys whose default is not None:
// diffusers would pass None on and fail later.
int64_t SchedulerConfig::get_int(const std::string& key, int64_t fallback) const {
  const auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_number_integer()) wrong_type(key, "an integer");
  return it->get<int64_t>();
}

double SchedulerConfig::get_number(const std::string& key, double fallback) const {
  const auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!is_number_like(*it)) wrong_type(key, "a number");
  return to_double(*it);
}

bool SchedulerConfig::get_bool(const std::string& key, bool fallback) const {
  const auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_boolean()) wrong_type(key, "a boolean");
  return it->get<bool>();
}

std::string SchedulerConfig::get_string(const std::string& key,
                                        const std::string& fallback) const {
  const auto it = json_.find(key);
  if (it == json_.end()) return fallback;
  if (!it->is_string()) wrong_type(key, "a string");
  return it->get<std::string>();
}

std::optional<std::string> SchedulerConfig::get_optional_string(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string or null");
  return v->get<std::string>();
}

std::optional<std::vector<double>> SchedulerConfig::get_optional_numbers(
    const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) wrong_type(key, "a list of numbers or null");
  std::vector<double> out;
  out.reserve(v->size());
  for (const auto& x : *v) {
    if (!is_number_like(x)) wrong_type(key, "a list of numbers or null");
    out.push_back(to_double(x));
  }
  return out;
}

bool SchedulerConfig::truthy(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (!v) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  if (v->is_string()) {  // the non-finite tokens are numbers, all true
    return non_finite(v->get<std::string>()) || !v->get<std::string>().empty();
  }
  return !v->empty();  // list or object
}

nlohmann::json parse_scheduler_config(const std::string& text, const std::string& path) {
  // Quote the bare Python tokens outside strings; everything else is copied.
  std::string fixed;
  fixed.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      fixed += c;
      if (c == '\\' && i + 1 < text.size()) {
        fixed += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const std::string t(token);
      if (text.compare(i, t.size(), t) == 0) {
        fixed += '"' + t + '"';
        i += t.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) fixed += c;
  }
  try {
    return nlohmann::json::parse(fixed);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for "1e400"
    throw ModelError(path + ": malformed JSON: " + e.what());
  }
}

nlohmann::json load_scheduler_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot read the scheduler config");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_scheduler_config(ss.str(), path);
}

}  // namespace ditgen::sched
