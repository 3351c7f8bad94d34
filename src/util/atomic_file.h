// Atomic output files (docs/design.md §1): every output is written to a temporary
// name in the same directory ("<path>.tmp.<pid>.<n>") and renamed onto the
// final path, so a reader never sees a half-written file.
//
// Temporary paths being written are kept in a fixed-size, lock-free registry
// of char buffers (no allocation, no locks), which a signal handler can walk
// async-signal-safely: cleanup_temp_files_now() unlinks every one, and the
// fatal-signal handlers (util/signals.h) call it, so an interrupted run
// leaves no temporary file behind either.
#pragma once
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

namespace ditgen {

// Creates the parent directories of `path` if needed, opens a fresh temporary
// file beside it, lets `writer` fill it, then renames it onto `path`.
// On any failure (directory, open, write, close, rename, or an exception from
// `writer`) the temporary file is removed and nothing appears at `path`.
// I/O failures throw RuntimeFailure("<path>: <what>: <errno text>"); an
// exception thrown by `writer` is rethrown unchanged. `writer` need not check
// fwrite's results: the stream's error flag is checked afterwards.
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer);
void write_file_atomic(const std::string& path, const void* bytes, size_t size);

// The same for a library that opens its output file itself, by name
// (libavformat: the MP4 muxer's faststart pass re-opens the file to read it
// back, so it cannot be handed a FILE*). `writer` receives the temporary
// path, which exists (empty, registered for signal cleanup) when it is
// called, and must write the file there by that name; the rename and all
// failure guarantees are as above.
void write_file_atomic_named(const std::string& path, const std::function<void(const std::string& temp_path)>& writer);

// One output of a batch landing (its files, then its manifest line): while
// a LandingScope is open, SIGINT / SIGTERM still end the run at once (the
// temporary files removed) until the scope's first file is renamed into
// place; from then on the signal is held until the scope closes, so an
// output is either wholly on disk with its manifest line or not there at
// all. The held signal then ends the run as it would have (130 / 143).
// Scopes do not nest.
class LandingScope {
 public:
  LandingScope();
  ~LandingScope();
  LandingScope(const LandingScope&) = delete;
  LandingScope& operator=(const LandingScope&) = delete;
};

// What SIGINT / SIGTERM do (util/signals.cpp installs it, with SA_RESTART):
// unlink the temporary files in flight and _exit(130 / 143), or, inside a
// LandingScope past its first rename, hold the signal until the scope
// closes. Async-signal-safe.
void on_termination_signal(int sig);

// Unlinks every temporary file currently being written (for fatal paths such
// as an MPI abort, where no destructor or catch will run). Async-signal-safe.
void cleanup_temp_files_now();

}  // namespace ditgen
