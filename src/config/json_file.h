// Reading the config file into JSON. Beyond nlohmann's parser this rejects
// duplicate keys, which JSON parsers otherwise resolve silently (last wins):
// like an unknown key, a repeated one is a mistake that must not quietly
// change the run.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace ditgen::config {

// Throws ConfigError naming the file: cannot read, invalid JSON (with
// nlohmann's line and column), or a duplicate key (with its dotted path).
nlohmann::json read_json_file(const std::string& path);

// The same checks on text already in memory; `file` names it in messages.
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

}  // namespace ditgen::config
