// The config loader's notes (RunConfig::notes: what a command-line value
// changed beyond its own field, config/command_line_rules.h), one stderr
// line each, by the rank that speaks for the job.
#pragma once
#include <cstdio>

#include "config/config.h"

namespace ditgen::cli {

inline void print_config_notes(const RunConfig& cfg) {
  for (const std::string& note : cfg.notes) std::fprintf(stderr, "ditgen: note: %s\n", note.c_str());
}

}  // namespace ditgen::cli
