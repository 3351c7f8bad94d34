// `ditgen encode --model DIR (--prompt TEXT ... | --prompt-file FILE)
// --output FILE.safetensors [--max-sequence-length N] [--dtype ...]
// [--ids-only]` (docs/design.md §1): the text stage alone. Per prompt i it
// writes ids_i and mask_i (int64 [L]) and, unless --ids-only, embeds_i
// (float32 [L, D]): exactly what the pipelines feed the transformer, so
// anyone can diff ditgen against transformers, or precompute embeddings.
// The file is written atomically; its metadata holds the prompts as read,
// the preprocessed texts, L, the dtype and the encoder.
#pragma once
#include "config/cli_options.h"

namespace ditgen::cli {

void run_encode(const CliOptions& opts);

}  // namespace ditgen::cli
