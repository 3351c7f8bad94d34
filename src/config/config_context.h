// Error reporting shared by every stage of config loading. All messages have
// one shape, "FILE: dotted.path: what is wrong[ (from --set ...)]", so a user
// can find the line to fix; when the command line supplied the value at
// fault, the message names what the user typed (--set ..., --prompt ...,
// --output ...), since the file itself may be fine.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditgen::config {

class ConfigContext {
 public:
  explicit ConfigContext(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // Records that the command line wrote `path`; `origin` is what the user
  // typed for it ("--set generate.steps=20", "--prompt \"\"", "--output x.png"),
  // quoted by messages about the value.
  void note_override(const std::string& path, const std::string& origin);

  // The origin of the last override that wrote `path` or a section holding
  // it; nullptr when the value is the file's own.
  const std::string* override_origin(const std::string& path) const;

  // Throws ConfigError("FILE: path: what (from --set ...)"). An empty path
  // means the document as a whole.
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;

 private:
  std::string file_;
  std::vector<std::pair<std::string, std::string>> overrides_;  // path, origin
};

// A JSON value as it appears in messages: compact, truncated when long.
std::string describe_value(const nlohmann::json& value);

// "parent.key", or "key" at the top level.
std::string join_path(const std::string& parent, const std::string& key);

}  // namespace ditgen::config
