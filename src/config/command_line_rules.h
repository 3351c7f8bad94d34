// How a value given on the command line (--set, or a flag that is one:
// --output, --prompt, --prompt-file, ...) settles the fields of the file it
// overrides, beyond its own field. The command line is the user's latest
// word, so it replaces what the file said rather than clash with it:
//
//   - prompts: a prompt source given on the command line (generate.prompts
//     or generate.prompt_file) replaces the file's other one;
//   - output format: an output.path given on the command line whose
//     extension is .png or .mp4 decides output.format, unless the command
//     line gives output.format too (the two disagreeing: ConfigError); a
//     document without output.format takes its path's extension's
//     (docs/design.md §2, round 4);
//   - a field of the file that the command line made inapplicable
//     (output.fps / output.crf once the format became png; parallel.sp_mode
//     once sp became 1, pp being 1; parallel.patches / warmup_steps once pp
//     became 1)
//     is removed, each removal said in one note line. The same fields set
//     inapplicably by the file itself are left for parse_run_config to
//     reject, as before.
//
// Runs on the document after the overrides are applied and before the
// typed reads; a value of the wrong type is left for those reads to report.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_context.h"

namespace ditgen::config {

// `file_document`: the file as read (what the file itself chose);
// `document`: the file with the overrides applied, edited in place.
// Appends to `notes` one line per removal ("output.fps and output.crf are
// dropped: ..."). Throws ConfigError on a clash the command line made.
void apply_command_line_rules(nlohmann::json& document, const nlohmann::json& file_document,
                              const ConfigContext& context, std::vector<std::string>& notes);

// "png" or "mp4" for a path whose file name ends in .png / .mp4 (any case),
// else "".
std::string output_format_of_extension(const std::string& path);

}  // namespace ditgen::config
