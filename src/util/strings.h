// Small string helpers shared by error messages across layers (one
// definition each, header-only: they are a few lines and used in cold paths).
#pragma once
#include <string>
#include <vector>

namespace ditgen {

// "a, b, c" (items in order, separated by `sep`); "" for no items.
inline std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace ditgen
