// Typed access to a parsed scheduler/scheduler_config.json, with diffusers'
// rule for absent keys (the scheduler class's own default applies) and
// errors that name the file and the key.
//
// Keys a scheduler does not read are ignored, as diffusers' from_config
// ignores them. A key that is read but has the wrong JSON type is a
// ModelError (a malformed model file); a well-typed value that is out of
// range or unknown is a ConfigError (exit 2), and one that selects behaviour
// ditgen does not implement is "not supported yet: ..." (exit 2).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditgen::sched {

class SchedulerConfig {
 public:
  SchedulerConfig(const nlohmann::json& json, std::string path);

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;  // present and not null

  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_number(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // For keys whose diffusers default is None: absent or null -> nullopt.
  std::optional<std::string> get_optional_string(const std::string& key) const;
  std::optional<std::vector<double>> get_optional_numbers(const std::string& key) const;
  // Python's truth value of the key, as diffusers' `if self.config.key:`
  // tests it: absent, null, false, 0, "", [] and {} are false.
  bool truthy(const std::string& key) const;

  // ConfigError "<path>: <key> = <value>: <why>" for a bad value.
  [[noreturn]] void bad_value(const std::string& key, const std::string& why) const;
  // ConfigError "not supported yet: <what> (<key> in <path>)".
  [[noreturn]] void unsupported(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json* find(const std::string& key) const;  // null if absent or null
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;

  nlohmann::json json_;
  std::string path_;
};

// Parses scheduler_config.json text. Python's json module (which diffusers
// uses to save configs) writes -Infinity, Infinity and NaN as bare tokens
// (e.g. "lambda_min_clipped": -Infinity), which strict JSON parsers reject;
// they are accepted here and read back by get_number. Throws ModelError
// naming `path` on malformed JSON.
nlohmann::json parse_scheduler_config(const std::string& text, const std::string& path);
// Reads and parses the file (ModelError if it cannot be read).
nlohmann::json load_scheduler_config(const std::string& path);

}  // namespace ditgen::sched
