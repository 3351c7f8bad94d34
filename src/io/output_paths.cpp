#include "io/output_paths.h"

#include <cstdio>

namespace ditgen::io {
namespace {

constexpr const char* kIndexPlaceholder = "{i}";

std::string zero_padded(int index, int width = 4) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%0*d", width, index);
  return digits;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
  return text;
}

// Position of the extension's '.' in the file name, or npos. A leading dot
// (".hidden") starts a name, not an extension.
std::size_t extension_start(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || dot <= name_start) return std::string::npos;
  return dot;
}

// "dir/name.ext" -> "dir/name" + suffix + ".ext" (no extension: appended).
std::string with_suffix(const std::string& path, const std::string& suffix, const std::string& new_extension) {
  const auto dot = extension_start(path);
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  const std::string extension = dot == std::string::npos ? "" : path.substr(dot);
  return stem + suffix + (new_extension.empty() ? extension : new_extension);
}

}  // namespace

std::string output_path_for(const std::string& pattern, int index, int count, const std::string& name) {
  if (!name.empty()) {  // the directory and extension of the numbered path, `name` as the stem
    const std::string numbered = output_path_for(pattern, index, count);
    const auto slash = numbered.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : numbered.substr(0, slash + 1);
    const auto dot = extension_start(numbered);
    return dir + name + (dot == std::string::npos ? "" : numbered.substr(dot));
  }
  if (pattern.find(kIndexPlaceholder) != std::string::npos)
    return replace_all(pattern, kIndexPlaceholder, zero_padded(index));
  if (count <= 1) return pattern;
  std::string suffix = "_";
  suffix += zero_padded(index);
  return with_suffix(pattern, suffix, "");
}

std::string video_path_for(const std::string& pattern, int index, int count, const std::string& name) {
  return with_suffix(output_path_for(pattern, index, count, name), "", ".mp4");
}

std::string frame_path_for(const std::string& pattern, int index, int count, int frame, const std::string& name) {
  return with_suffix(output_path_for(pattern, index, count, name), "_f" + zero_padded(frame, 3), ".png");
}

std::string grid_path_for(const std::string& pattern) {
  if (pattern.find(kIndexPlaceholder) != std::string::npos)
    return with_suffix(replace_all(pattern, kIndexPlaceholder, "grid"), "", ".png");
  return with_suffix(pattern, "_grid", ".png");
}

std::string manifest_path_for(const std::string& pattern) {
  if (pattern.find(kIndexPlaceholder) != std::string::npos)
    return with_suffix(replace_all(pattern, kIndexPlaceholder, "manifest"), "", ".jsonl");
  return with_suffix(pattern, "_manifest", ".jsonl");
}

}  // namespace ditgen::io
