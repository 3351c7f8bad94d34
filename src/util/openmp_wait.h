// How long ditgen's OpenMP threads spin before they sleep (issue 33: no
// collapse when the CPU is shared). libgomp's workers wait at every
// barrier by spinning up to GOMP_SPINCOUNT times (300000 by default,
// milliseconds of busy work) before they block. On an idle machine that
// saves a wake-up; beside other work it burns the time slices the other
// threads of the team need to reach the barrier, and a run slows by far
// more than its share of the cores. ditgen therefore runs with a short
// spin (kDitgenSpinCount) unless the user set OMP_WAIT_POLICY or
// GOMP_SPINCOUNT themselves.
//
// libgomp reads its settings once, as it loads, before main: setting the
// variable later has no effect. So main calls this first: when neither
// variable is set, it sets GOMP_SPINCOUNT and executes ditgen again
// (/proc/self/exe, the same arguments and environment otherwise). The
// second start finds the variable and goes on. If the exec fails, the run
// goes on with libgomp's defaults.
#pragma once

namespace ditgen {

// Measured in docs/cpu.md ("Sharing the CPU"): as fast as the default
// alone, and no collapse beside a 2-thread load.
inline constexpr const char* kDitgenSpinCount = "10000";

// Returns only when no re-execution was needed or possible.
void reexec_with_short_openmp_spin(char** argv);

}  // namespace ditgen
