// `ditgen convert --input DIR_OR_FILE [--component transformer|transformer_2|
// text_encoder|vae] --type TYPE --output FILE.gguf|FILE.safetensors`
// (docs/design.md §1): one model part's weights written as a GGUF file
// (quantized, in the names and with the types of the published GGUF files)
// or a safetensors file (F32, F16 or BF16), tensor by tensor from the
// mapped source, with a progress line. Which part, names and types:
// models/weight_conversion.h; the writing: io/weight_convert.h. The
// arguments and the output folder are checked before any weight is read;
// the file appears whole or not at all.
#pragma once
#include "config/cli_options.h"

namespace ditgen::cli {

void run_convert(const CliOptions& opts);

}  // namespace ditgen::cli
