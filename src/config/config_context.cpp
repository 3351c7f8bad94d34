// See config_context.h.
#include "config/config_context.h"

#include "util/error.h"

namespace ditgen::config {
namespace {

// True when `path` is `prefix` or lies inside it ("a.b" in "a", "a[2]" in "a").
bool path_within(const std::string& path, const std::string& prefix) {
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

}  // namespace

void ConfigContext::note_override(const std::string& path, const std::string& origin) {
  overrides_.emplace_back(path, origin);
}

const std::string* ConfigContext::override_origin(const std::string& path) const {
  // The last override that wrote this value (later overrides win).
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it)
    if (!path.empty() && path_within(path, it->first)) return &it->second;
  return nullptr;
}

void ConfigContext::fail(const std::string& path, const std::string& what) const {
  std::string message = file_ + ": ";
  if (!path.empty()) message += path + ": ";
  message += what;
  if (const std::string* origin = override_origin(path)) message += " (from " + *origin + ")";
  throw ConfigError(message);
}

std::string describe_value(const nlohmann::json& value) {
  constexpr std::size_t kMaxChars = 60;
  // (replace: a message must never throw, whatever bytes the value holds)
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

}  // namespace ditgen::config
