// How ditgen meets the signals that can end a run (docs/design.md §1: nothing
// half-written is ever left behind):
//   SIGINT, SIGTERM  unlink the temporary outputs in flight, _exit(130 / 143);
//                    while a batch output lands, held until it has landed
//                    (util/atomic_file.h: LandingScope)
//   SIGBUS           a mapped model file was truncated or replaced while in
//                    use: say which file (util/mapped_files.h) and in which
//                    stage, unlink the temporary outputs, _exit(3) (a bad
//                    model file), instead of a crash dump
//   SIGXFSZ          ignored: a write past RLIMIT_FSIZE then fails with
//                    EFBIG, which the output writer reports (exit 4) and
//                    cleans up, instead of the process being killed with
//                    its temporary file left behind
// Handlers only call async-signal-safe functions (unlink, write, _exit).
// Under mpirun a rank that exits this way ends the whole job.
#pragma once

namespace ditgen {

// Idempotent.
void install_signal_handlers();

}  // namespace ditgen
