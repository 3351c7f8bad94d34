// The generate run's main loop, one model load for every output: the
// condition stage over every output still to make (the text encoder sees
// each distinct prompt once, through the embedding cache when there is
// one, and is released before denoising: docs/design.md §2), then per model
// batch the denoising loop and, on the output rank, the decode and the
// landing of each output: its files (temporary name, renamed) and its
// manifest line, inside a LandingScope so a signal leaves either both or
// neither. Progress says where the whole batch is (outputs done / total,
// ETA) in the per-step bar's label.
#pragma once
#include <string>
#include <vector>

#include "cli/batch_work.h"
#include "config/cli_options.h"
#include "config/config.h"
#include "io/output_writer.h"
#include "pipeline/pipeline.h"

namespace ditgen::cli {

struct BatchInputs {
  const RunConfig* cfg = nullptr;        // as the user gave it (metadata, manifest)
  const CliOptions* opts = nullptr;
  const pipeline::Pipeline* pipe = nullptr;
  const pipeline::Request* req = nullptr;  // every output of the run
  const BatchWork* work = nullptr;
  std::vector<std::unique_ptr<io::OutputWriter>>* writers = nullptr;  // the output rank's
  std::string config_json;               // the effective config, into every file's metadata
  std::string ran_parameters;            // what ran, appended to the webui parameters (", Device: cpu, ...")
  std::string ran_json;                  // what ran, as JSON: the "ditgen_run" metadata
  std::vector<int> lines;                // per output: its prompt file line (empty: no file)
  bool output_rank = true;
  bool quiet = false;
  int world_rank = 0;                    // for the test hooks (cli/layout_setup.h)
};

struct BatchOutcome {
  pipeline::PabSummary pab;
  sched::Sampler scheduler = sched::Sampler::kModelDefault;  // the one used
  Tensor latents;                  // every output's final latents, when kept (--save-latents)
  std::vector<std::string> written;  // files written, in order
  int made = 0;                    // outputs generated
  int64_t forwards = 0;            // denoising steps run (all batches)
};

// Runs the work; `keep_latents`: gather the final latents of every output
// (all must be pending).
BatchOutcome run_batch(const BatchInputs& in, bool keep_latents);

}  // namespace ditgen::cli
