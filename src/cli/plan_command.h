// `ditgen plan --config run.json [--world-size N]`: the layout's (or every
// valid layout's) per-rank weight and activation memory and bytes sent per
// denoising step, from config.json alone (no weights are read).
#pragma once
#include "config/cli_options.h"

namespace ditgen::cli {

void run_plan(const CliOptions& opts);

}  // namespace ditgen::cli
