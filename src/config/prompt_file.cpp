#include "config/prompt_file.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/json_file.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ditgen::config {

namespace {

using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_string()) throw ConfigError(where + ": " + key + ": expected a string, got " + v.type_name());
  return v.get<std::string>();
}

void check_name(const std::string& name, const std::string& where) {
  if (name.empty() || name == "." || name == ".." || name.size() > 200 ||
      name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    throw ConfigError(where + ": name: expected a file stem (1 to 200 bytes, no '/', '\\\\' or NUL), got \"" +
                      name + "\"");
}

PromptEntry parse_jsonl_line(const std::string& line, const std::string& where) {
  const json obj = parse_json_text(line, where);
  if (!obj.is_object()) throw ConfigError(where + ": expected a JSON object with \"prompt\", got " + obj.type_name());
  PromptEntry e;
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (it.key() != "prompt" && it.key() != "negative_prompt" && it.key() != "seed" && it.key() != "frames" &&
        it.key() != "name" && it.key() != "image" && it.key() != "last_image")
      throw ConfigError(where + ": unknown key \"" + it.key() +
                        "\" (expected prompt, negative_prompt, seed, frames, name, image, last_image)");
  if (!obj.contains("prompt")) throw ConfigError(where + ": prompt: required");
  e.prompt = string_field(obj, "prompt", where);
  check_prompt_text(e.prompt, where + ": prompt");
  if (obj.contains("negative_prompt")) {
    e.negative_prompt = string_field(obj, "negative_prompt", where);
    check_prompt_text(*e.negative_prompt, where + ": negative_prompt");
  }
  if (obj.contains("seed")) {
    const json& v = obj["seed"];
    if (!v.is_number_unsigned()) throw ConfigError(where + ": seed: expected a non-negative integer, got " + v.dump());
    e.seed = v.get<uint64_t>();
  }
  if (obj.contains("frames")) {
    const json& v = obj["frames"];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 100000)
      throw ConfigError(where + ": frames: expected an integer from 1 to 100000, got " + v.dump());
    e.frames = static_cast<int>(v.get<uint64_t>());
  }
  if (obj.contains("name")) {
    e.name = string_field(obj, "name", where);
    check_name(e.name, where);
  }
  for (const auto& [key, field] : {std::pair{"image", &e.image}, std::pair{"last_image", &e.last_image}})
    if (obj.contains(key)) {
      *field = string_field(obj, key, where);
      if (field->empty()) throw ConfigError(where + ": " + key + ": expected a PNG or JPEG file, got \"\"");
    }
  return e;
}

}  // namespace

std::string empty_prompt_problem(const std::string& prompt) {
  if (prompt.find_first_not_of(" \t\n\r\v\f") != std::string::npos) return "";
  return std::string("the prompt is ") + (prompt.empty() ? "empty" : "only whitespace") +
         "; write what the output should show (the empty text is classifier-free guidance's unconditional half, "
         "not a prompt)";
}

void check_prompt_text(const std::string& prompt, const std::string& where) {
  if (prompt.size() > kMaxPromptBytes)
    throw ConfigError(where + ": the prompt is " + std::to_string(prompt.size()) + " bytes; at most " +
                      std::to_string(kMaxPromptBytes) + " are accepted");
  const size_t bad = first_invalid_utf8(prompt);
  if (bad != std::string::npos)
    throw ConfigError(where + ": invalid UTF-8 at byte " + std::to_string(bad) + " of the prompt");
}

std::vector<PromptEntry> parse_prompt_text(const std::string& text, const std::string& file, bool jsonl) {
  std::vector<PromptEntry> out;
  size_t begin = 0;
  int line_no = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = file + ":" + std::to_string(line_no);
    if (line.size() > kMaxPromptBytes + 4096)  // room for the JSON around a maximal prompt
      throw ConfigError(where + ": the line is " + std::to_string(line.size()) + " bytes; a prompt may have at most " +
                        std::to_string(kMaxPromptBytes));
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (jsonl) {
      const size_t bad = first_invalid_utf8(line);
      if (bad != std::string::npos) throw ConfigError(where + ": invalid UTF-8 at byte " + std::to_string(bad));
      out.push_back(parse_jsonl_line(line, where));
    } else {
      check_prompt_text(line, where);
      out.push_back(PromptEntry{line, std::nullopt, std::nullopt, std::nullopt, "", "", "", 0});
    }
    out.back().line = line_no;
  }
  if (out.empty()) throw ConfigError(file + ": no prompts (every line is blank or a # comment)");
  return out;
}

std::vector<PromptEntry> read_prompt_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw ConfigError(path + ": the prompt file is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the prompt file: " + errno_text(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw ConfigError(path + ": cannot read the prompt file (not a regular file?)");
  if (static_cast<uint64_t>(size) > kMaxPromptFileBytes)
    throw ConfigError(path + ": the prompt file is " + std::to_string(size) + " bytes; at most " +
                      std::to_string(kMaxPromptFileBytes) + " are read");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(text.data(), size)) throw ConfigError(path + ": cannot read the prompt file");
  std::vector<PromptEntry> entries = parse_prompt_text(text, path, ends_with(path, ".jsonl"));
  // A line's images name places beside the prompt file, as a config's
  // paths name places beside the config.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  for (PromptEntry& e : entries)
    for (std::string* image : {&e.image, &e.last_image})
      if (!image->empty() && std::filesystem::path(*image).is_relative())
        *image = (folder / *image).lexically_normal().string();
  return entries;
}

}  // namespace ditgen::config
