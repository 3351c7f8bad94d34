// The doctest main of test_gpu. Listing (what doctest_discover_tests runs at
// build time, also --help, --version, --count) works on any machine, so the
// gpu tests are registered with ctest everywhere. Running tests without a
// visible CUDA device prints why and exits 77, the SKIP_RETURN_CODE that
// tests/CMakeLists.txt gives every gpu test: ctest shows them as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

#include "kernels/cuda/device.h"

namespace {

constexpr int kSkipExitCode = 77;

// doctest's options that only print something: "-ltc", "--list-test-cases",
// "--dt-list-test-cases=1", ... (one or two dashes, optional "dt-" prefix).
bool only_prints(std::string_view arg) {
  if (arg.empty() || arg[0] != '-') return false;
  arg.remove_prefix(arg.size() > 1 && arg[1] == '-' ? 2 : 1);
  if (arg.substr(0, 3) == "dt-") arg.remove_prefix(3);
  arg = arg.substr(0, arg.find('='));
  for (std::string_view option : {"list-test-cases", "ltc", "list-test-suites", "lts",
                                  "list-reporters", "lr", "help", "h", "?", "version", "v",
                                  "count", "c"}) {
    if (arg == option) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || only_prints(argv[i]);
  if (!listing && ditgen::cuda::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device visible (test_gpu needs a GPU)\n");
    return kSkipExitCode;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
