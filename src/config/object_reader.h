// Typed reads of one JSON object of the config, each with its default when
// absent and its type and range check when present. A failed check names the
// dotted path and the value found: "generate.steps: expected a positive
// integer, got \"fifty\"". JSON null in a file is a wrong type like any other
// (absent keys take defaults); `--set key=null` removes a key before these
// reads (config/overrides.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_context.h"
#include "util/enum_names.h"

namespace ditgen::config {

class ObjectReader {
 public:
  // `object` must outlive the reader. A non-object fails at construction.
  ObjectReader(const nlohmann::json& object, std::string path, const ConfigContext& context);

  const std::string& path() const { return path_; }
  const ConfigContext& context() const { return context_; }
  std::string path_of(const std::string& key) const { return join_path(path_, key); }

  // nullptr when absent.
  const nlohmann::json* find(const std::string& key) const;

  // The sub-section `key`; an empty object when absent.
  ObjectReader section(const std::string& key) const;

  int integer(const std::string& key, int fallback, int min) const;
  std::uint64_t unsigned64(const std::string& key, std::uint64_t fallback) const;
  // min_exclusive: value > min, else value >= min.
  double number(const std::string& key, double fallback, double min, bool min_exclusive) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  std::string required_string(const std::string& key, const std::string& what_it_is) const;
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& allowed) const;
  // choice() over an enum's name table (config/enum_names.h, or any rows
  // with a `value` and a `name`).
  template <class Row, std::size_t N, class E>
  E enum_choice(const std::string& key, E fallback, const Row (&table)[N]) const {
    const std::string name = choice(key, name_in(table, fallback), names_in(table));
    for (const auto& entry : table)
      if (name == entry.name) return entry.value;
    return fallback;  // not reached: choice() accepts only the table's names
  }

 private:
  const nlohmann::json& object_;
  std::string path_;
  const ConfigContext& context_;
};

// Element-level checks, for list items ("generate.class_labels[1]").
int read_integer(const nlohmann::json& value, const std::string& path, int min,
                 const ConfigContext& context);
double read_number(const nlohmann::json& value, const std::string& path,
                   const ConfigContext& context);
const nlohmann::json& read_array(const nlohmann::json& value, const std::string& path,
                                 const ConfigContext& context);

}  // namespace ditgen::config
