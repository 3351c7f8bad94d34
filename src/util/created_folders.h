// Folders a run creates for its outputs, so that a run which ends without
// filling them (interrupted, or failed) removes them again rather than
// leave an empty output folder behind (issue 36). Every folder ditgen
// creates goes through create_folders(), which records each folder it
// made, parents first, in a fixed-size lock-free registry (as
// util/atomic_file.h's temporary paths): remove_empty_created_folders_now()
// walks it deepest first and rmdir()s each, which removes exactly those
// that are still empty (rmdir refuses any other). Async-signal-safe, so
// the SIGINT / SIGTERM handler calls it too.
#pragma once
#include <string>

namespace ditgen {

// std::filesystem::create_directories for `folder` ("" or "." is the current
// folder: nothing to do), recording every folder it creates. Returns false
// with `error` set (errno text) when a folder cannot be created.
bool create_folders(const std::string& folder, std::string& error);

// rmdir()s every recorded folder, deepest first; those that hold anything
// stay. Returns how many were removed. Async-signal-safe.
int remove_empty_created_folders_now();

// The first folder the run created that remove_empty_created_folders_now
// removed (for the interrupt message), or "" when none. Async-signal-safe.
const char* first_removed_folder();

}  // namespace ditgen
