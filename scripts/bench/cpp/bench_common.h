// Small helpers shared by the benchmark programs of scripts/bench: the median
// of repeated timings, reading an option's value from the command line, the
// step cache settings the PAB benchmarks compare (--caches), and PSNR
// averaged over images with identical ones capped; main's error report.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "pab/step_cache.h"
#include "util/error.h"

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

// First-Block Cache at 0.05 .. 0.3 and TeaCache at 0.1 .. 0.5, TeaCache with
// `coefficients` (empty: the identity rescale), each with its name
// ("first_block 0.1").
inline std::vector<std::pair<std::string, pab::StepCacheSettings>> step_cache_settings(
    std::vector<double> coefficients = {}) {
  if (coefficients.empty()) coefficients = {0, 0, 0, 1, 0};
  std::vector<std::pair<std::string, pab::StepCacheSettings>> out;
  auto name = [](const char* kind, double t) {
    char b[48];
    std::snprintf(b, sizeof b, "%s %g", kind, t);
    return std::string(b);
  };
  for (double t : {0.05, 0.1, 0.15, 0.2, 0.3})
    out.push_back({name("first_block", t), {CacheKind::kFirstBlock, t, {}}});
  for (double t : {0.1, 0.2, 0.3, 0.5})
    out.push_back({name("teacache", t), {CacheKind::kTeaCache, t, coefficients}});
  return out;
}

// An image's PSNR against its reference, identical images counted as 100 dB
// (so a mean over images stays finite when a step cache leaves some untouched).
inline double capped_psnr(double psnr) { return std::min(psnr, 100.0); }

// "a,b,c,d,e" -> five numbers (--coefficients); empty on anything else.
inline std::vector<double> parse_coefficients(const std::string& text) {
  std::vector<double> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    try {
      out.push_back(std::stod(text.substr(pos, comma - pos)));
    } catch (const std::exception&) {
      return {};
    }
    pos = comma + 1;
  }
  return out.size() == 5 ? out : std::vector<double>{};
}

// main's body for a benchmark program: run(), an error reported as
// "<program>: <message>" with ditgen's exit code for it (1 for others).
template <class Run>
int run_reporting_errors(const char* program, Run run) {
  try {
    return run();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ditgen::bench
