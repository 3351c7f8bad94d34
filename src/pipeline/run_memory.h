// What a run holds in memory, per rank and per stage (docs/cli.md,
// "ditgen plan: memory and time"):
// `plan` prints it, a run decides its VAE tiling and checks --memory-limit
// against it. From config files and the layout's figures alone, nothing
// loaded.
//
// A rank's resident bytes in each stage, as the run orders them (cli/
// generate_command.cpp: the weights load, then per batch: text -> denoise
// -> decode on the output rank):
//   everywhere     the process itself (measured: resident bytes before
//                  anything loads: code, libraries, MPI, allocator), the
//                  transformer's weights per rank (parallel/plan.h), and
//                  on the output rank (rank 0) the VAE decoder's weights
//   text encoding  + the text encoder's weights (its params x the compute
//                  dtype; loaded for this stage and released after) + its
//                  activations (16 floats per row of width D: residual,
//                  norm, q, k, v, attention output, the gated MLP's
//                  hidden) + the embeddings it makes
//   denoising      + the embeddings + one forward's activations
//                  (parallel/plan.h) + the batch's latents (three copies:
//                  the sample, the model output, the scheduler's state)
//   VAE decode     output rank only: + the batch's latents + the decode's
//                  working memory (VaeSpec::decode_bytes, of one tile when
//                  tiled) + the decoded frames (outputs x F x 3 x H x W
//                  float32); the other ranks are done and hold only the
//                  first line.
// Not counted: the output writers' buffers (one frame's bytes, and the
// contact sheet's cells), page cache of files read, GPU memory (a CUDA run
// holds its weights and activations on the device: these are host
// figures for a CPU run).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "pipeline/vae_tiling.h"

namespace ditgen::pipeline {

struct StageMemory {
  double text_encoding = 0, denoising = 0, decode = 0;  // decode 0: this rank does not decode
  double peak() const;
  const char* peak_stage() const;  // "text encoding", "denoising" or "VAE decode"
};

struct RunMemory {
  // The parts (bytes).
  double process = 0, transformer_weights = 0, vae_weights = 0;
  double text_encoder_weights = 0, text_activations = 0, embeddings = 0;
  double activations = 0, latents = 0, decode_work = 0, decoded_frames = 0;
  int world_size = 1;
  StageMemory output_rank;  // rank 0: decodes and writes
  StageMemory other_ranks;  // ranks 1..world_size-1 (world_size > 1)
  // The largest of every rank's peaks, and where it is.
  double peak() const;
  std::string peak_where() const;  // "rank 0, VAE decode"
};

// What the run's memory depends on besides the pipeline.
struct RunMemoryInputs {
  double process_bytes = 0;   // resident_bytes() before anything loads
  parallel::PlanRow row;      // the layout's per-rank weights and activations
  DType compute = DType::kF32, vae = DType::kF32;
  Shape latent;               // one output's, (C, h, w) or (C, F, h, w)
  int64_t batch_outputs = 1;  // outputs one model batch makes (what one decode takes)
  int64_t texts = 0;          // texts the encoder runs over at once (prompts and negatives)
  int64_t text_tokens = 0;    // rows per text
};

// The figures for a decode tiled on `tiles` (empty: whole).
RunMemory plan_run_memory(const Pipeline& pipe, const RunMemoryInputs& in,
                          const std::optional<models::nn::TileGrid>& tiles);

// The run's VAE tiling decided against `limit_bytes` (the output rank's
// whole budget: what it holds besides the decode is subtracted) and its
// memory with that decode. `limit_given` (--memory-limit): a limit below
// the run's peak is a ConfigError naming --memory-limit and the smallest
// limit that works.
struct RunMemoryPlan {
  RunMemory memory;
  VaeTilingDecision tiling;
  double limit_bytes = 0;
};
RunMemoryPlan plan_run(const Pipeline& pipe, const RunMemoryInputs& in, const VaeConfig& vae, double limit_bytes,
                       bool limit_given, const std::string& where);

}  // namespace ditgen::pipeline
