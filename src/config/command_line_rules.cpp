// See command_line_rules.h. Each rule reads "given on the command line" as
// ConfigContext::override_origin: an override wrote the key or its section.
#include "config/command_line_rules.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace ditgen::config {
namespace {

using nlohmann::json;

// section.key in `document`, or nullptr.
const json* find_key(const json& document, const std::string& section, const std::string& key) {
  const auto s = document.find(section);
  if (s == document.end() || !s->is_object()) return nullptr;
  const auto v = s->find(key);
  return v == s->end() ? nullptr : &*v;
}

// An integer setting's value (absent: `fallback`); nullopt for another type.
std::optional<long long> integer_or(const json& document, const std::string& section, const std::string& key,
                                    long long fallback) {
  const json* value = find_key(document, section, key);
  if (!value) return fallback;
  if (!value->is_number_integer()) return std::nullopt;
  return value->get<long long>();
}

std::string joined_with_and(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

// Removes the keys of `section` that the file set and the command line did
// not, and says so: "<keys> dropped: <why>".
void drop_file_keys(json& document, const std::string& section, const std::vector<std::string>& keys,
                    const ConfigContext& context, const std::string& why, std::vector<std::string>& notes) {
  auto s = document.find(section);
  if (s == document.end() || !s->is_object()) return;
  std::vector<std::string> dropped;
  for (const std::string& key : keys) {
    const std::string path = section + "." + key;
    if (s->contains(key) && !context.override_origin(path)) {
      s->erase(key);
      dropped.push_back(path);
    }
  }
  if (dropped.empty()) return;
  notes.push_back(joined_with_and(dropped) + (dropped.size() == 1 ? " is" : " are") + " dropped: " + why);
}

// A prompt source given on the command line replaces the file's other one.
void command_line_prompts_replace_the_files(json& document, const ConfigContext& context) {
  if (!find_key(document, "generate", "prompts") || !find_key(document, "generate", "prompt_file")) return;
  const bool prompts_given = context.override_origin("generate.prompts") != nullptr;
  const bool file_given = context.override_origin("generate.prompt_file") != nullptr;
  if (prompts_given == file_given) return;  // both from one place: parse_run_config says "not both"
  document["generate"].erase(prompts_given ? "prompt_file" : "prompts");
}

// The format the file itself chose: its output.format, else its path's
// extension's, else png (the default).
std::string file_output_format(const json& file_document) {
  if (const json* format = find_key(file_document, "output", "format"); format && format->is_string())
    return format->get<std::string>();
  if (const json* path = find_key(file_document, "output", "path"); path && path->is_string())
    if (const std::string by_extension = output_format_of_extension(path->get<std::string>()); !by_extension.empty())
      return by_extension;
  return "png";
}

void settle_output_format(json& document, const json& file_document, const ConfigContext& context,
                          std::vector<std::string>& notes) {
  const json* path = find_key(document, "output", "path");
  if (!path || !path->is_string()) return;  // required: parse_run_config says so
  json& output = document["output"];
  const std::string by_extension = output_format_of_extension(path->get<std::string>());
  const std::string* path_origin = context.override_origin("output.path");
  const json* format = find_key(document, "output", "format");
  const std::string* format_origin = format ? context.override_origin("output.format") : nullptr;
  const std::string* chosen_by = format_origin;  // the command-line word that chose the format
  if (!by_extension.empty()) {
    if (path_origin && format_origin) {
      if (format->is_string() && format->get<std::string>() != by_extension)
        context.fail("output.format", describe_value(*format) + " does not write a ." + by_extension +
                                          " file, and output.path " + describe_value(*path) + " (from " +
                                          *path_origin + ") is one; give one of the two, or agreeing ones");
    } else if (path_origin) {
      output["format"] = by_extension;
      chosen_by = path_origin;
    } else if (!format) {
      output["format"] = by_extension;
    }
  }
  // Once the command line turned the file's mp4 output into png, the file's
  // encoder settings no longer apply.
  const json* now = find_key(document, "output", "format");
  if (!chosen_by || !now || !now->is_string()) return;
  const std::string format_now = now->get<std::string>();
  if (format_now == "mp4" || format_now == file_output_format(file_document)) return;
  drop_file_keys(document, "output", {"fps", "crf"}, context,
                 "mp4 output only takes them, and " + *chosen_by + " writes " + format_now, notes);
}

// parallel.<count> made 1 by the command line retires the file's settings
// of what that count enables.
void settle_parallel(json& document, const json& file_document, const ConfigContext& context,
                     const std::string& count, const std::vector<std::string>& keys, const std::string& what,
                     std::vector<std::string>& notes) {
  const std::string* origin = context.override_origin("parallel." + count);
  if (!origin) return;
  const auto now = integer_or(document, "parallel", count, 1);
  const auto before = integer_or(file_document, "parallel", count, 1);
  if (!now || *now != 1 || !before || *before == 1) return;
  std::vector<std::string> retired = keys;
  // sp_mode "auto" is the default, not a choice of the file.
  if (const json* mode = find_key(document, "parallel", "sp_mode"); mode && *mode == "auto")
    retired.erase(std::remove(retired.begin(), retired.end(), "sp_mode"), retired.end());
  drop_file_keys(document, "parallel", retired, context,
                 what + " only takes them, and " + *origin + " makes parallel." + count + " 1", notes);
}

}  // namespace

std::string output_format_of_extension(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return "";
  std::string extension = name.substr(dot + 1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == "png" || extension == "mp4" ? extension : "";
}

void apply_command_line_rules(json& document, const json& file_document, const ConfigContext& context,
                              std::vector<std::string>& notes) {
  if (!document.is_object()) return;
  command_line_prompts_replace_the_files(document, context);
  settle_output_format(document, file_document, context, notes);
  // sp_mode serves PipeFusion too: retired only when pp is 1 as well.
  if (integer_or(document, "parallel", "pp", 1) == 1)
    settle_parallel(document, file_document, context, "sp", {"sp_mode"}, "sequence parallelism (parallel.sp > 1)",
                    notes);
  settle_parallel(document, file_document, context, "pp", {"patches", "warmup_steps"},
                  "PipeFusion (parallel.pp > 1)", notes);
}

}  // namespace ditgen::config
