// DiT: diffusers' DiTTransformer2DModel (class-conditional, adaLN-Zero),
// on the CPU (float32) or CUDA (float32 / bfloat16 / float16, models::Placement).
// Weights are borrowed from the mmapped safetensors when
// stored as F32 (F16/BF16 converted once at load). Every size comes from the
// part's config.json; every tensor is checked by name and shape before any is
// loaded. The forward is written as explicit block stages so that PAB (a
// later issue) can hook attention and MLP outputs.
//
// Parallel layouts (DESIGN.md §4) live here too, described by a DitShard:
// tp splits QKV, the MLP input and each adaLN chunk by output rows (heads /
// features) and the attention output and MLP output projections by input
// columns, followed by one all-reduce with the bias added once after it; each
// rank loads only its own slices, so its weight memory falls as 1/tp. sp
// splits the tokens (uneven shards allowed); attention then runs either
// Ulysses-style (an all-to-all turns the token shard into a head shard and
// one turns it back) or as ring attention (K/V blocks travel around the ring,
// partial results merged by log-sum-exp). Every rank returns the full output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/communicator.h"
#include "io/safetensors.h"
#include "models/placement.h"
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

// This rank's part of the model. Null communicators mean size 1.
struct DitShard {
  parallel::Communicator* tp = nullptr;
  parallel::Communicator* sp = nullptr;
  bool ring = false;  // sp_mode "ring" (default "ulysses")
  int tp_size() const { return tp ? tp->size() : 1; }
  int tp_rank() const { return tp ? tp->rank() : 0; }
  int sp_size() const { return sp ? sp->size() : 1; }
  int sp_rank() const { return sp ? sp->rank() : 0; }
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
  static DitTransformer load(const io::WeightStore& weights, const DitConfig& cfg, const DitShard& shard = {},
                             const Placement& place = {});

  // x: (B, in_channels, S, S) latents (host float32); timesteps: B values;
  // labels: B class indices in [0, num_classes] (num_classes = null class).
  // Returns (B, out_channels, S, S) as host float32, on every rank of the
  // shard; everything in between runs on the model's placement. With a PAB
  // cache, each block's spatial attention output (after out-proj and its
  // all-reduce, before the gate) and MLP output are reused when the cache
  // says so, skipping their compute and communication.
  Tensor forward(const Tensor& x, const std::vector<float>& timesteps, const std::vector<int64_t>& labels,
                 pab::BroadcastCache* pab = nullptr) const;

  const DitConfig& config() const { return cfg_; }
  const DitShard& shard() const { return shard_; }
  const Placement& placement() const { return place_; }
  // Block i's weights as loaded (tests check where they live and their dtype).
  const DitBlock& block(size_t i) const { return blocks.at(i); }

 private:
  // (B, 6D) adaLN modulation of one block from its conditioning.
  Tensor modulation(const DitBlock& blk, const Tensor& cond) const;
  // This rank's attention output (B, P, Dl) from its q, k, v (B, P, Dl).
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) const;
  void attention_ulysses(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) const;
  void attention_ring(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) const;
  // Bytes this rank has sent through its tp and sp groups so far.
  int64_t comm_bytes() const;
  // y (B, P, D) = x W^T summed over the tp ranks, plus the bias once.
  Tensor row_parallel_linear(const Tensor& x, const Tensor& w, const Tensor& bias) const;

  DitConfig cfg_;
  DitShard shard_;
  Placement place_;
  Tensor patch_w, patch_b;          // (D, C*p*p), (D)   pos_embed.proj as a linear
  Tensor pos_embed;                 // (N, D)            2-D sin-cos, N = grid^2
  std::vector<DitBlock> blocks;
  Tensor final_ada_w, final_ada_b;  // (2D, D), (2D)     proj_out_1
  Tensor final_w, final_b;          // (p*p*out, D), (p*p*out)  proj_out_2
};

}  // namespace ditgen::models
