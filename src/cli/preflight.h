// Everything about a generate run that can be checked without reading a
// weight: the model's sizes against generate.height/width, the class labels,
// the step count against the scheduler, --init-noise, the PAB schedule, and
// that every output path can be written. Runs before the (slow) weight load,
// so a mistake costs milliseconds rather than a whole run; all failures are
// exit 2 naming the file and field.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "config/cli_options.h"
#include "config/config.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::cli {

struct Preflight {
  std::vector<int64_t> labels;    // resolved class ids, one per output
  std::optional<Tensor> init_noise;
  pab::Schedule pab;
};

// `output_rank`: this rank writes the outputs (their paths are probed).
Preflight preflight(const RunConfig& cfg, const CliOptions& opts, bool output_rank);

}  // namespace ditgen::cli
