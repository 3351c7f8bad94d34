// What a run says when SIGINT or SIGTERM ends it (issue 36): which stage
// was interrupted, and what is kept: the outputs already landed with their
// manifest lines, and that --resume makes the rest; also that the folders
// the run created and left empty are gone (util/created_folders.h). Only
// the output rank is armed: under mpirun every rank gets the signal, one
// speaks. The handler (util/atomic_file.cpp) calls say_interrupted, which
// formats with write() alone (async-signal-safe).
#pragma once
#include <cstdint>
#include <string>

namespace ditgen {

// Arms the report: this run makes `to_make` outputs and lists them in
// `manifest` (copied; "" = no manifest).
void arm_interrupt_report(const std::string& manifest, int64_t to_make);

// One more output has landed with its manifest line.
void note_output_landed();

// Writes the one-line report to stderr if armed. `removed_folders`: how
// many empty folders the cleanup removed. Async-signal-safe.
void say_interrupted(int sig, int removed_folders);

}  // namespace ditgen
