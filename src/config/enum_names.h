// The config's enumerated settings as enums, each with its names in one
// table: parsing (ObjectReader::enum_choice), messages, to_json and the
// files' metadata all read the table, so a value is parsed once, when the
// config is read, and the code that runs it compares enums, not strings.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ditgen {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// output.format
enum class OutputFormat { kPng, kMp4 };
inline constexpr EnumName<OutputFormat> kOutputFormatNames[] = {{OutputFormat::kPng, "png"},
                                                                {OutputFormat::kMp4, "mp4"}};

template <class E, std::size_t N>
const char* name_in(const EnumName<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

template <class E, std::size_t N>
std::vector<std::string> names_in(const EnumName<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

inline const char* name_of(OutputFormat f) { return name_in(kOutputFormatNames, f); }

}  // namespace ditgen
