// `ditgen plan --config run.json [--world-size N]`: the layout's (or every
// valid layout's) per-rank weight and activation memory and bytes sent per
// denoising step, from config.json alone (no weights are read); for one
// layout each rank's memory per stage and the stage of the peak
// (pipeline/run_memory.h), and a time estimate (cli/rate_probe.h,
// parallel/step_cost.h; --no-calibrate: none).
#pragma once
#include "config/cli_options.h"

namespace ditgen::cli {

void run_plan(const CliOptions& opts);

}  // namespace ditgen::cli
