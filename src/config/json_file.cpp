// See json_file.h. Duplicate keys are found with nlohmann's parser callback,
// which reports object/array starts and ends and each key: a stack of open
// containers gives the dotted path of the repeated key.
#include "config/json_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "util/error.h"
#include "util/utf8.h"

namespace ditgen::config {
namespace {

using nlohmann::json;

// One open object or array while parsing.
struct OpenContainer {
  bool is_array = false;
  std::set<std::string> keys_seen;  // objects
  std::string current_key;          // objects
  int next_index = 0;               // arrays
};

std::string path_of(const std::vector<OpenContainer>& open) {
  std::string path;
  for (const auto& c : open) {
    if (c.is_array) {
      path += '[';
      path += std::to_string(c.next_index);
      path += ']';
    } else {
      if (!path.empty()) path += '.';
      path += c.current_key;
    }
  }
  return path;
}

// nlohmann's what() starts with "[json.exception.parse_error.101] ": keep
// only the part a user reads ("parse error at line 3, column 5: ...").
std::string without_exception_tag(const std::string& what) {
  const auto end_of_tag = what.find("] ");
  return end_of_tag == std::string::npos ? what : what.substr(end_of_tag + 2);
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& file) {
  std::vector<OpenContainer> open;
  std::string duplicate_path;
  auto watch_keys = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open.push_back({}); break;
      case json::parse_event_t::array_start: {
        OpenContainer array;
        array.is_array = true;
        open.push_back(std::move(array));
        break;
      }
      case json::parse_event_t::key: {
        auto& object = open.back();
        object.current_key = parsed.get<std::string>();
        if (!object.keys_seen.insert(object.current_key).second && duplicate_path.empty())
          duplicate_path = path_of(open);
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        if (!open.empty() && open.back().is_array) ++open.back().next_index;
        break;
      case json::parse_event_t::value:  // scalars only: containers end above
        if (!open.empty() && open.back().is_array) ++open.back().next_index;
        break;
    }
    return true;
  };
  json document;
  try {
    document = json::parse(text, watch_keys);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond double ("1e400").
    // The message quotes the bytes read last ("last read: '...'"): from a
    // binary file they are escaped, not sent to the terminal raw.
    throw ConfigError(file + ": invalid JSON: " + printable_text(without_exception_tag(e.what())));
  }
  if (!duplicate_path.empty())
    throw ConfigError(file + ": " + duplicate_path + ": duplicate key (each key may appear once)");
  return document;
}

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": cannot read config file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read config file: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read config file: read error");
  return parse_json_text(text.str(), path);
}

}  // namespace ditgen::config
