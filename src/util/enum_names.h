// An enum's names in one table: whoever parses, prints or records the enum
// reads the table (config/enum_names.h, sched/sampler.h), so a value is
// parsed once and its name written in one place.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ditgen {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`, any array of rows with a `value` and a
// `name` (EnumName, or a richer row such as sched::SamplerRow).
template <class Row, std::size_t N, class E>
const char* name_in(const Row (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

// The value named `name` in `table`; none for a name not in it.
template <class Row, std::size_t N>
auto value_in(const Row (&table)[N], std::string_view name) -> std::optional<decltype(table[0].value)> {
  for (const auto& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

template <class Row, std::size_t N>
std::vector<std::string> names_in(const Row (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

}  // namespace ditgen
