// DiT: diffusers' DiTTransformer2DModel (class-conditional, adaLN-Zero),
// on the CPU (float32) or CUDA (float32 / bfloat16 / float16, models::Placement).
// Weights are borrowed from the mmapped safetensors when
// stored as F32 (F16/BF16 converted once at load). Every size comes from the
// part's config.json; every tensor is checked by name and shape before any is
// loaded. A composition of the modules of models/nn/: per block a timestep
// and label embedding, an adaLN-Zero modulation and the modulated attention
// and MLP of nn::TransformerBlock (whose PAB branches (pab/broadcast.h) may
// reuse a block's attention and MLP outputs); around the blocks the patch
// embedding and the final layer.
//
// Under a parallel layout (docs/design.md §4, ShardGroups) each rank loads only its
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
#include "models/nn/embeddings.h"
#include "models/nn/final_layer.h"
#include "models/nn/modulation.h"
#include "models/nn/transformer_block.h"
#include "models/placement.h"
#include "models/stage.h"
#include "models/transformer.h"
#include "models/transformer_sizes.h"
#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct DitConfig : TransformerSizes {
  int64_t num_classes = 0;    // num_embeds_ada_norm; index num_classes is the null (CFG) class
  float norm_eps = 1e-5f;     // MLP-branch LayerNorm (attention branch and final use 1e-6)
  bool learned_sigma() const { return out_channels == 2 * in_channels; }

  // Reads transformer/config.json (DiTTransformer2DModel, or the legacy
  // Transformer2DModel with norm_type ada_norm_zero). ModelError naming
  // `path` and the key for anything missing, mistyped or unsupported.
  static DitConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

// One transformer block as held by this rank: its conditioning embedders
// (one per block in diffusers' layout), its adaLN-Zero modulation and the
// modulated attention and MLP (models/nn/).
struct DitBlock {
  nn::TimestepEmbedding timestep;  // norm1.emb.timestep_embedder: (D, 256), (D, D)
  nn::LabelEmbedding label;        // norm1.emb.class_embedder: (num_classes + 1, D)
  nn::AdaLnZero modulation;        // norm1.linear: 6 chunks of (D/tp, D)
  nn::TransformerBlock body;       // attn1 (this rank's heads), ff (its features)
};

class DitTransformer {
 public:
  // The model class contract of models/family_spec.h; layer i holds its
  // conditioning embedders and block (one embedder per block in diffusers'
  // layout; the original DiT repository shares one).
  static nn::TensorDecls stem_tensors(const DitConfig& cfg);
  static nn::TensorDecls embedder_tensors(const DitConfig& cfg, int64_t layer);
  static nn::TensorDecls block_tensors(const DitConfig& cfg, int64_t layer);
  static nn::TensorDecls layer_tensors(const DitConfig& cfg, int64_t layer);  // its embedders and block

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
                 pab::BroadcastCache* pab = nullptr, parallel::StaleKeyValues* stale_kv = nullptr,
                 pab::StepCache* step_cache = nullptr) const;
  Tensor forward(const ForwardArgs& a) const {
    return forward(*a.latents, a.timesteps, a.class_labels, a.pab, a.stale_kv, a.step_cache);
  }

  const DitConfig& config() const { return cfg_; }
  // Block i as loaded (tests check where its weights live and their dtype).
  const DitBlock& block(size_t i) const { return blocks_.at(i); }

 private:
  // Block `i`'s conditioning (B, D): its timestep embedding of the
  // sinusoids t_emb (B, 256) plus its label embedding.
  Tensor conditioning(size_t i, const Tensor& t_emb, const std::vector<int64_t>& labels) const;

  DitConfig cfg_;
  Stage stage_;                   // sp attention, PipeFusion stage, placement
  nn::PatchEmbed patch_embed_;    // pos_embed.proj: (D, C, p, p) as a linear
  Tensor pos_embed_;              // (N, D) 2-D sin-cos, N = grid^2
  std::vector<DitBlock> blocks_;  // L; under PipeFusion only this stage's are loaded
  nn::FinalLayer final_layer_;    // proj_out_1 (2D, D) of the conditioning, proj_out_2 (p*p*out, D)
};

}  // namespace ditgen::models
