// The notes a run prints before its work, one stderr line each, by the rank
// that speaks for the job: the config loader's (RunConfig::notes: what a
// command-line value changed beyond its own field,
// config/command_line_rules.h) and the pipeline's (Pipeline::notes: which
// published config a component file took, pipeline/component_files.h).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "config/config.h"

namespace ditgen::cli {

inline void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes) std::fprintf(stderr, "ditgen: note: %s\n", note.c_str());
}

inline void print_config_notes(const RunConfig& cfg) { print_notes(cfg.notes); }

}  // namespace ditgen::cli
