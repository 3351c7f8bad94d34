// What a run makes, output by output, decided before any weight is read
// (docs/design.md §1-2: generate.prompt_file, --prompt-file, --resume,
// output.skip_existing):
//
//   - the prompt file, when there is one: every line read and checked
//     (config/prompt_file.h; a bad line is exit 2 with its line number,
//     nothing generated), its prompts becoming the run's prompts and its
//     JSONL fields each output's own negative prompt, seed and file name;
//   - the outputs still to make: all of them, or with skip_existing those
//     whose files are not all on disk;
//   - under mpirun, one agreement: every rank reads the config and prompt
//     file itself and hashes the work it describes; rank 0 (the output
//     rank, the one that sees the files) sends its hash and the outputs to
//     make, and a rank whose hash differs fails the job before the weights
//     are loaded. (Test hook: DITGEN_TEST_WORK_DIFFERS_ON_RANK=r makes rank
//     r's hash differ.)
//
// An output keeps its index in the whole run whatever is skipped, so its
// seed (seed + index, or its line's) and hence its noise do not depend on
// what ran before it: a resumed batch makes the same files an
// uninterrupted one would.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/prompt_file.h"
#include "io/output_writer.h"
#include "pipeline/pipeline.h"

namespace ditgen::cli {

// The prompt file's entries (none without one), read and checked. A
// class-conditional model given a prompt file is a ConfigError.
std::vector<config::PromptEntry> read_batch_prompts(const RunConfig& cfg, const std::string& where,
                                                    const pipeline::Pipeline& pipe);

// The config the pipeline prepares from: the prompt file's prompts as
// generate.prompts.
RunConfig with_prompt_file_prompts(const RunConfig& cfg, const std::vector<config::PromptEntry>& entries);

// Each entry's negative prompt and seed into the request (output i's seed:
// its line's, else generate.seed + i). ConfigError "<file>:<line>: ..." for
// a `frames` the run cannot honour, or a `name` used twice.
void apply_prompt_entries(pipeline::Request& req, const std::vector<config::PromptEntry>& entries,
                          const RunConfig& cfg);

// Each output's file stem from its entry's `name` ("" = numbered); empty
// when no entry has one.
std::vector<std::string> output_names(const std::vector<config::PromptEntry>& entries);

struct BatchWork {
  std::vector<std::vector<std::string>> files;  // per output: its final files (output rank only)
  std::vector<int64_t> pending;                 // the outputs to make, in order
  std::string hash;                             // of the work every rank agreed on
};

// The outputs to make (skip_existing: those whose files are not all there),
// agreed by every rank of the world communicator. `writers`: the output
// rank's (empty elsewhere).
BatchWork plan_batch_work(const RunConfig& cfg, const pipeline::Request& req,
                          const std::vector<std::unique_ptr<io::OutputWriter>>& writers, bool output_rank);

}  // namespace ditgen::cli
