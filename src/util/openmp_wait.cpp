// See openmp_wait.h.
#include "util/openmp_wait.h"

#include <unistd.h>

#include <cstring>

namespace ditgen {

void reexec_with_short_openmp_spin(char** argv, char** envp) {
  if (!argv || !envp) return;
  size_t n = 0;
  for (; envp[n]; ++n)
    if (std::strncmp(envp[n], "GOMP_SPINCOUNT=", 15) == 0 || std::strncmp(envp[n], "OMP_WAIT_POLICY=", 16) == 0)
      return;
  // Static storage: no allocator is needed this early.
  static char spin[] = "GOMP_SPINCOUNT=\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
  static char* env[8192];
  if (n + 2 > sizeof env / sizeof env[0]) return;
  std::strncpy(spin + 15, kDitgenSpinCount, sizeof spin - 16);
  for (size_t i = 0; i < n; ++i) env[i] = envp[i];
  env[n] = spin;
  env[n + 1] = nullptr;
  execve("/proc/self/exe", argv, env);
}

}  // namespace ditgen
