// How long ditgen's OpenMP threads spin before they sleep (issue 33: no
// collapse when the CPU is shared). libgomp's workers wait at every barrier
// by spinning up to GOMP_SPINCOUNT times (300000 by default, milliseconds
// of busy work) before they block. On an idle machine that saves a wake-up;
// beside other work it burns the time slices the team's other threads need
// to reach the barrier: the default image config took 5.4x as long beside
// a 2-thread busy loop as alone. ditgen runs with a short spin
// (kDitgenSpinCount) unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT
// themselves (docs/cpu.md, "Sharing the CPU", has the measurements).
//
// libgomp reads its settings once, in its own initialiser, before main;
// setting the variable any time after the process started has no effect
// (even from the executable's .preinit_array, which runs before every
// library's initialiser: libc's own initialiser then resets the
// environment to the one the process was started with). So, from the
// .preinit_array (src/cli/main.cpp), before any library has initialised,
// ditgen executes itself again with the variable added; the second start
// finds it and goes on. That costs the mapping of the libraries once more
// (about 10 ms), not their initialisers.
#pragma once

namespace ditgen {

// Measured on 2 cores (docs/cpu.md): as fast as libgomp's default alone,
// 2.4x alone beside a 2-thread load (the default: 5.4x); 100 and passive
// waiting are 40% slower alone.
inline constexpr const char* kDitgenSpinCount = "1000";

// When `envp` sets neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, executes
// /proc/self/exe with `argv` and `envp` plus GOMP_SPINCOUNT=kDitgenSpinCount,
// and returns only if that fails (libgomp's defaults then stay). Uses no
// allocation and no library state: it runs before the libraries initialise.
void reexec_with_short_openmp_spin(char** argv, char** envp);

}  // namespace ditgen
