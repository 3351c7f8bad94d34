// The `ditgen --config run.json` job: config -> pipeline -> PNG files.
#pragma once
#include "config/cli_options.h"

namespace ditgen::cli {

// Runs the generation described by the options; throws ditgen::Error.
void run_generate(const CliOptions& opts);

}  // namespace ditgen::cli
