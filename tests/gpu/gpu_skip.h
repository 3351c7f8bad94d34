// How a gpu test case skips when what it needs is not there (more GPUs, a
// device of compute capability 8.0, cudnn-frontend in the build): it prints
// "SKIPPED: <why>" and, in a filtered run (how ctest runs each discovered
// case: --test-case=<name>), exits 77, which ctest (SKIP_RETURN_CODE 77)
// reports as skipped rather than passed. Unfiltered (test_gpu run by hand),
// the case only prints the line and returns, so the cases after it still run.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace ditgen::gputest {

inline constexpr int kSkipExitCode = 77;

// Whether this run of test_gpu was restricted to chosen test cases.
inline bool filtered_run() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const char* opt : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="})
    if (cmdline.find(std::string(1, '\0') + opt) != std::string::npos) return true;
  return false;
}

// Prints why and skips (see above); returns only in an unfiltered run.
inline void skip_test(const std::string& why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
  if (filtered_run()) std::exit(kSkipExitCode);
  MESSAGE("SKIPPED: " << why);
}

}  // namespace ditgen::gputest
