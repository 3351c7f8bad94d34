// See did_you_mean.h.
#include "config/did_you_mean.h"

#include <algorithm>

namespace ditgen::config {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // d[i][j]: distance between a[0..i) and b[0..j); three rows suffice for the
  // transposition case, but the strings are short, so keep the full table.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  // Short words allow one edit, longer ones two: "cp" -> "sp" is a typo,
  // "path" -> "fps" is not.
  const std::size_t reach = word.size() <= 4 ? 1 : 2;
  std::string best;
  std::size_t best_distance = reach + 1;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace ditgen::config
