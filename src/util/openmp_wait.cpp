// See openmp_wait.h.
#include "util/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace ditgen {

void reexec_with_short_openmp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", kDitgenSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed (no /proc); libgomp keeps its defaults.
}

}  // namespace ditgen
