// Small string helpers shared by error messages across layers (one
// definition each, header-only: they are a few lines and used in cold paths).
#pragma once
#include <cstdio>
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

// "0 B", "1023 B", "12.00 KiB", "45.16 MiB", "2.79 GiB": binary units, two
// decimals above bytes (plan tables, the PAB summary).
inline std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

// "46.7 s", or "12m05s" from a minute on: the step bar, the batch's ETA,
// plan's time estimate.
inline std::string format_duration(double seconds) {
  char text[32];
  if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else {
    const long total = static_cast<long>(seconds + 0.5);
    std::snprintf(text, sizeof text, "%ldm%02lds", total / 60, total % 60);
  }
  return text;
}

}  // namespace ditgen
