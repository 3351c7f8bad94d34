// DiT: diffusers' DiTTransformer2DModel (class-conditional, adaLN-Zero),
// float32 on the CPU. Weights are borrowed from the mmapped safetensors when
// stored as F32 (F16/BF16 converted once at load). Every size comes from the
// part's config.json; every tensor is checked by name and shape before any is
// loaded. The forward is written as explicit block stages so that PAB and the
// parallel layouts (later issues) can hook attention and MLP outputs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
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

struct DitBlock {
  Tensor t_linear1_w, t_linear1_b;  // (D, 256), (D)   timestep embedder
  Tensor t_linear2_w, t_linear2_b;  // (D, D), (D)
  Tensor class_table;               // (num_classes + 1, D)
  Tensor ada_w, ada_b;              // (6D, D), (6D)   adaLN-Zero modulation
  Tensor q_w, q_b, k_w, k_b, v_w, v_b;  // (D, D), (D) each
  Tensor out_w, out_b;              // (D, D), (D)
  Tensor ff1_w, ff1_b;              // (F, D), (F)     F = ff_inner_dim
  Tensor ff2_w, ff2_b;              // (D, F), (D)
};

class DitTransformer {
 public:
  static DitTransformer load(const io::WeightStore& weights, const DitConfig& cfg);

  // x: (B, in_channels, S, S) latents; timesteps: B values; labels: B class
  // indices in [0, num_classes] (num_classes = null class).
  // Returns (B, out_channels, S, S).
  Tensor forward(const Tensor& x, const std::vector<float>& timesteps, const std::vector<int64_t>& labels) const;

  const DitConfig& config() const { return cfg_; }

 private:
  DitConfig cfg_;
  Tensor patch_w, patch_b;          // (D, C*p*p), (D)   pos_embed.proj as a linear
  Tensor pos_embed;                 // (N, D)            2-D sin-cos, N = grid^2
  std::vector<DitBlock> blocks;
  Tensor final_ada_w, final_ada_b;  // (2D, D), (2D)     proj_out_1
  Tensor final_w, final_b;          // (p*p*out, D), (p*p*out)  proj_out_2
};

}  // namespace ditgen::models
