// Small helpers shared by the benchmark programs of scripts/bench: the median
// of repeated timings, and reading an option's value from the command line.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

namespace ditgen::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The value of option argv[i] (advancing i past it); usage(2) when missing.
template <class Usage>
std::string option_value(int argc, char** argv, int& i, Usage usage) {
  if (i + 1 >= argc) usage(2);
  return argv[++i];
}

}  // namespace ditgen::bench
