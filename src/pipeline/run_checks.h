// The rules that cross a run's parts, each written once: what the request
// (the config's sections and the command line), the model and the
// layout allow together. cli's generate applies them once, after the
// layout is formed and before any weight is read, so a run that cannot
// work fails in milliseconds; the pipeline then runs what was checked and
// checks nothing again. Rules that one part settles alone stay with it:
// a section's own fields (config/parse_run_config.cpp), the layout
// against the model's attention (parallel::layout_problems: sizes,
// divisibility, cp = 2 needing guidance), the request against the model
// (Pipeline::prepare: labels or prompts, sizes, samplers).
#pragma once
#include <string>

#include "parallel/layout.h"
#include "pipeline/pipeline.h"

namespace ditgen::pipeline {

// ConfigError "not supported yet: ..." (exit 2) naming `where` (the config
// file) and the settings that clash:
//   PAB or --pab-analyze with PipeFusion (parallel.pp > 1): PAB keeps one
//     output per block and branch, PipeFusion runs each block once per
//     patch, on patches of other sizes than the warm-up's whole image;
//   PAB or --pab-analyze with a two-expert model: the experts' branches
//     differ, and one cache keeps one model's.
void check_run(const Request& req, const Pipeline& pipe, const parallel::Layout& layout, const std::string& where);

}  // namespace ditgen::pipeline
