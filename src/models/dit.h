// DiT: diffusers' DiTTransformer2DModel (class-conditional, adaLN-Zero),
// on the CPU (float32) or CUDA (float32 / bfloat16 / float16, models::Placement).
// Weights are borrowed from the mmapped safetensors when
// stored as F32 (F16/BF16 converted once at load). Every size comes from the
// part's config.json; every tensor is checked by name and shape before any is
// loaded. The forward is written as explicit block stages so that PAB
// (pab/broadcast.h) can reuse the attention and MLP outputs of a block.
//
// Under a parallel layout (DESIGN.md §4, ShardGroups) each rank loads only its
// own slices of the weights (its heads and MLP features with tp) and runs
// its own tokens (with sp); the parallel mechanisms themselves (token
// sharding, Ulysses / ring attention, the tp splits and their collectives)
// are the src/parallel/ module's (sequence_attention.h, token_shard.h,
// tensor_parallel.h), which this model calls. Every rank returns the full
// output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/communicator.h"
#include "parallel/patch_pipeline.h"
#include "parallel/sequence_attention.h"
#include "io/safetensors.h"
#include "models/placement.h"
#include "models/transformer.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct DitConfig {
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;   // 2 * in_channels when sigma is learned
  int64_t sample_size = 0;    // latent height = width
  int64_t patch_size = 0;
  int64_t num_classes = 0;    // num_embeds_ada_norm; index num_classes is the null (CFG) class
  int64_t ff_inner_dim = 0;   // 4 * inner_dim unless config says otherwise
  float norm_eps = 1e-5f;     // MLP-branch LayerNorm (attention branch and final use 1e-6)
  int64_t inner_dim() const { return num_heads * head_dim; }
  int64_t grid() const { return sample_size / patch_size; }
  bool learned_sigma() const { return out_channels == 2 * in_channels; }

  // Reads transformer/config.json (DiTTransformer2DModel, or the legacy
  // Transformer2DModel with norm_type ada_norm_zero). ModelError naming
  // `path` and the key for anything missing, mistyped or unsupported.
  static DitConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

// One transformer block's weights as held by this rank (Dl = D/tp,
// Fl = F/tp; with tp = 1 these are the whole tensors, borrowed from the file).
struct DitBlock {
  Tensor t_linear1_w, t_linear1_b;  // (D, 256), (D)   timestep embedder
  Tensor t_linear2_w, t_linear2_b;  // (D, D), (D)
  Tensor class_table;               // (num_classes + 1, D)
  Tensor ada_w[6], ada_b[6];        // (Dl, D), (Dl) each: this rank's rows of each adaLN-Zero chunk
  Tensor q_w, q_b, k_w, k_b, v_w, v_b;  // (Dl, D), (Dl) each: this rank's heads
  Tensor out_w, out_b;              // (D, Dl), (D): input columns of this rank's heads; bias whole
  Tensor ff1_w, ff1_b;              // (Fl, D), (Fl)   F = ff_inner_dim
  Tensor ff2_w, ff2_b;              // (D, Fl), (D)
};

class DitTransformer {
 public:
  // Validates names and shapes of every tensor, then loads this rank's part
  // onto `place` (its device and compute dtype). The shard's communicators
  // must outlive the model.
  static DitTransformer load(const io::WeightStore& weights, const DitConfig& cfg, const ShardGroups& shard = {},
                             const Placement& place = {});

  // x: (B, in_channels, S, S) latents (host float32); timesteps: B values;
  // labels: B class indices in [0, num_classes] (num_classes = null class).
  // Returns (B, out_channels, S, S) as host float32, on every rank of the
  // shard; everything in between runs on the model's placement. With a PAB
  // cache, each block's spatial attention output (after out-proj and its
  // all-reduce, before the gate) and MLP output are reused when the cache
  // says so, skipping their compute and communication.
  // Under PipeFusion (shard.pp), this stage runs its layers over each patch;
  // stale_kv holds the keys and values of earlier steps (null: synchronous).
  Tensor forward(const Tensor& x, const std::vector<float>& timesteps, const std::vector<int64_t>& labels,
                 pab::BroadcastCache* pab = nullptr, parallel::StaleKeyValues* stale_kv = nullptr) const;

  const DitConfig& config() const { return cfg_; }
  const ShardGroups& shard() const { return shard_; }
  const Placement& placement() const { return place_; }
  // Block i's weights as loaded (tests check where they live and their dtype).
  const DitBlock& block(size_t i) const { return blocks.at(i); }

 private:
  // (B, 6D) adaLN modulation of one block from its conditioning.
  Tensor modulation(const DitBlock& blk, const Tensor& cond) const;
  // Bytes this rank has sent through its tp and sp groups so far.
  int64_t comm_bytes() const;
  // This stage's blocks over the residual rows (B, P, D) of this rank's P
  // tokens of `patch` (the whole image without PipeFusion) of n, in place;
  // mods: each of the stage's blocks' (B, 6D) modulation.
  void run_blocks(Tensor& hidden, parallel::Range patch, int64_t p, int64_t n, const std::vector<Tensor>& mods,
                  pab::BroadcastCache* pab, parallel::StaleKeyValues* stale_kv) const;

  DitConfig cfg_;
  ShardGroups shard_;
  parallel::SequenceParallelAttention seq_attn_;  // self-attention over the sp group
  parallel::PatchPipeline pipe_;                  // PipeFusion's stages (one: every layer)
  Placement place_;
  Tensor patch_w, patch_b;          // (D, C*p*p), (D)   pos_embed.proj as a linear
  Tensor pos_embed;                 // (N, D)            2-D sin-cos, N = grid^2
  std::vector<DitBlock> blocks;     // L; under PipeFusion only this stage's are loaded
  Tensor final_ada_w, final_ada_b;  // (2D, D), (2D)     proj_out_1
  Tensor final_w, final_b;          // (p*p*out, D), (p*p*out)  proj_out_2
};

}  // namespace ditgen::models
