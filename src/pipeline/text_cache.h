// The prompt embedding cache (--text-cache DIR, off by default): the text
// stage's result for one text, (L, D) float32 embeddings and its real token
// count, kept as DIR/<key hash>.safetensors so a batch run again (or a
// prompt shared by several runs) skips the tokenizer and the encoder.
//
// Key: the hash of every file of the tokenizer folder and of the encoder's
// folder (config and weights: a retrained or re-converted encoder never
// matches), or, for an encoder given as one file (model.text_encoder), of
// its config.json and that file; the encoder's dtype and device, the max length and the prompt
// as given. Each entry stores its whole key in its metadata and is used
// only when that key, the tensors' names, dtypes and shapes and the token
// count all check out; a corrupt or mismatched entry is ignored with a
// warning on stderr and written again. Weight files are hashed once per
// (path, size, mtime): the result is remembered in DIR/fingerprints/, so a
// warm cache costs a stat per file, not a read of the weights.
//
// Texts found in the cache never reach the tokenizer or the encoder, and
// when every text is found the encoder is not loaded at all.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/placement.h"
#include "pipeline/text_encoding.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

struct CachedEncoding {
  Tensor embeds;                    // (N, L, D) host float32, one per text
  std::vector<int64_t> num_tokens;  // N: each text's real tokens
  int hits = 0, misses = 0;         // distinct texts found / encoded (0, 0 without a cache)
};

// stage.encode(texts, max_length, place), through the cache in `cache_dir`
// ("" = no cache: exactly stage.encode). An unwritable cache is a warning,
// never a failed run.
CachedEncoding encode_with_cache(const TextStage& stage, const std::vector<std::string>& texts, int64_t max_length,
                                 const models::Placement& place, const std::string& cache_dir);

}  // namespace ditgen::pipeline
