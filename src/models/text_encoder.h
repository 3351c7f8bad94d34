// The text-encoder seam, as models/transformer.h is the denoiser's: what a
// text-encoder family answers from its config.json alone (TextEncoderSpec:
// sizes, weight count, the tensors it expects) and the encoder a pipeline
// calls (TextEncoder: token ids in, one embedding row per token out). T5 and
// UMT5 (models/t5.h) are the families today; the registry
// (models/registry.h) maps a text_encoder/config.json to one.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "io/safetensors.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// A batch of tokenized prompts, all padded to one length L: ids[i] holds L
// ids, of which the first lengths[i] are real (the tokenizer's mask is 1 on
// exactly those) and the rest padding, which no real token attends to.
struct TokenBatch {
  std::vector<std::vector<int64_t>> ids;  // N x L
  std::vector<int64_t> lengths;           // N, each in [1, L]
  int64_t max_length() const { return ids.empty() ? 0 : static_cast<int64_t>(ids[0].size()); }
};

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // (N, L, hidden) host float32: every position's last hidden state, the
  // padded ones included (as transformers' last_hidden_state).
  virtual Tensor encode(const TokenBatch& tokens) const = 0;
};

class TextEncoderSpec {
 public:
  virtual ~TextEncoderSpec() = default;
  virtual const char* family() const = 0;   // "t5"
  virtual const char* variant() const = 0;  // "T5 v1.0 (relu)", "UMT5 (gated-gelu)", ...
  virtual int64_t hidden_size() const = 0;  // D of the embeddings
  virtual int64_t vocab_size() const = 0;   // rows of the embedding table
  virtual int64_t param_count() const = 0;
  // How one file of this encoder is read (model.text_encoder): its GGUF
  // architecture and other naming (io::SingleFileOptions). Default: the
  // names as stored.
  virtual io::SingleFileOptions single_file_options() const { return {}; }
  // Checks every tensor load() reads against `weights` (name, shape,
  // floating type), reading none: ModelError naming the file and the first
  // tensor that does not fit.
  virtual void check_weights(const io::WeightStore& weights) const = 0;
  // Validates every tensor's name and shape against the config, then loads
  // the weights onto `place`: GEMM weights as Placement::matrix says (on the
  // CPU: as stored, or converted once to cpu_matrix_dtype with the source
  // pages released as they go), the rest as Placement::put.
  virtual std::unique_ptr<TextEncoder> load(const io::WeightStore& weights, const Placement& place) const = 0;
};

}  // namespace ditgen::models
