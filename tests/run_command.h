// Runs a shell command (ditgen, or mpirun of it) and captures its exit code,
// combined stdout + stderr and wall time; the mpirun root flags are set so
// the CLI and layout tests run as root in CI containers.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ditgen::testing {

struct Run {
  int code;
  std::string output;
  double seconds;
};

inline Run run_command(const std::string& cmd) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const auto start = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, secs};
}

}  // namespace ditgen::testing
