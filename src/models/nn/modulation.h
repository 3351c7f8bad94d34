// adaLN modulation (DiT, Peebles & Xie 2023; PixArt-α's adaLN-single): a
// block's residual stream is normalised (LayerNorm without affine), then
// scaled and shifted, before each branch, and each branch's output is gated
// before it is added back, by chunks of a per-sample modulation vector.
//   Modulation       a block's (B, 6D) vector as diffusers chunks it:
//                    shift, scale, gate of the attention branch, then of the
//                    feed-forward branch (D columns each), and the two uses
//                    of those chunks; or a (B*P, 6D) one, a vector per token
//                    (Wan 2.2 TI2V's per-token timesteps), applied to x
//                    viewed as B*P one-token rows.
//   AdaLnZero        DiT's per-block modulation: a linear of SiLU(the
//                    block's conditioning) in K chunks (K = 6), each
//                    column-split over tp and all-gathered
//                    (parallel/tensor_parallel.h), so per-rank weights fall
//                    as 1/tp while every rank gets the whole vector.
//   AdaLnSingle      PixArt's shared modulation (Latte's; Wan's time
//                    projection has the same form): a timestep embedding,
//                    then one linear of its SiLU to (B, K*D), computed once
//                    per forward for every block; held whole.
//   ScaleShiftTable  adaLN-single's per-block part: a learned (K, D) table
//                    added to the shared vector (also the final layer's
//                    (2, D) table plus the embedded timestep).
// Profiling scopes (util/profile.h): adaln (making a modulation),
// layer_norm (the modulated norm), residual (the gated add).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/embeddings.h"
#include "models/nn/linear.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// A (B, 6D) modulation is two triples of chunks: shift, scale, gate.
constexpr int64_t kModulationChunks = 6;
enum class Triple { kFirst = 0, kSecond = 1 };
// A block's two branches take them in diffusers' order: the attention the
// first triple, the feed-forward the second. (An MM-DiT's joint sequence
// takes them by the kind of row instead: nn/joint_attention.h.)
enum class Branch { kAttention = 0, kFeedForward = 1 };
constexpr Triple triple_of(Branch b) { return b == Branch::kAttention ? Triple::kFirst : Triple::kSecond; }

class Modulation {
 public:
  // mod (B, 6D) or (B*P, 6D) per token, D = dim.
  Modulation(Tensor mod, int64_t dim) : mod_(std::move(mod)), dim_(dim) {}
  // out (B, P, D) = LN(x) * (1 + scale) + shift of `triple`, LN at eps without affine.
  void normalize(const Tensor& x, Triple triple, float eps, Tensor& out) const;
  // x (B, P, D) += gate of `triple` * y.
  void add_gated(Tensor& x, const Tensor& y, Triple triple) const;
  // The same by the block branch that takes the triple.
  void normalize(const Tensor& x, Branch branch, float eps, Tensor& out) const {
    normalize(x, triple_of(branch), eps, out);
  }
  void add_gated(Tensor& x, const Tensor& y, Branch branch) const { add_gated(x, y, triple_of(branch)); }

 private:
  // x (B, P, D) as the rows mod_ has: itself, or (B*P, 1, D) for a per-token mod_.
  Tensor rows_of(const Tensor& x) const;

  Tensor mod_;  // (B, 6D) or (B*P, 6D)
  int64_t dim_ = 0;
};

class AdaLnZero {
 public:
  // Under `prefix` ("transformer_blocks.0.norm1.linear."): (K*D, C), (K*D),
  // C = cond_dim (0: D; CogVideoX's time_embed_dim).
  static TensorDecls tensors(const std::string& prefix, int64_t dim, int64_t chunks = kModulationChunks,
                             int64_t cond_dim = 0);
  // This rank's D/tp rows of each chunk (tp, null = size 1, must divide D
  // and outlive the module).
  static AdaLnZero load(const io::WeightStore& weights, const std::string& prefix, int64_t dim,
                        parallel::Communicator* tp, const Placement& place, int64_t chunks = kModulationChunks);
  // conditioning (B, C) -> (B, K*D), every chunk whole.
  Tensor operator()(const Tensor& conditioning) const;

  const ColumnParallelLinear& chunk(size_t i) const { return chunks_.at(i); }

 private:
  parallel::Communicator* tp_ = nullptr;
  Placement place_;
  int64_t local_ = 0;                         // D/tp
  std::vector<ColumnParallelLinear> chunks_;  // K of (D/tp, C)
};

// Where an adaLN-single's two parts are stored.
struct AdaLnSingleNames {
  std::string embedder;    // the TimestepEmbedding's prefix: "adaln_single.emb.timestep_embedder." (Wan:
                           // "condition_embedder.time_embedder.")
  std::string projection;  // the linear's: "adaln_single.linear." (Wan: "condition_embedder.time_proj.")
};

class AdaLnSingle {
 public:
  // Its tensors: the timestep embedder (W = D, on sinusoids of `channels`)
  // and the linear (K*D, D).
  static TensorDecls tensors(const AdaLnSingleNames& names, int64_t dim, int64_t chunks = kModulationChunks,
                             int64_t channels = TimestepEmbedding::kChannels);
  static AdaLnSingle load(const io::WeightStore& weights, const AdaLnSingleNames& names, const Placement& place);
  // (B, D): the embedded timesteps (TimestepEmbedding, sinusoids with shift 0).
  Tensor embed(const std::vector<float>& timesteps, const Placement& place) const;
  // embedded (B, D) -> (B, K*D): the blocks' shared modulation.
  Tensor operator()(const Tensor& embedded) const;

 private:
  TimestepEmbedding timestep_;  // emb.timestep_embedder
  Linear linear_;               // (K*D, D)
};

class ScaleShiftTable {
 public:
  // `name` ("transformer_blocks.0.scale_shift_table"): (rows, D); stored
  // (1, rows, D) when `leading_one` (Wan's).
  static TensorDecls tensors(const std::string& name, int64_t rows, int64_t dim, bool leading_one = false);
  static ScaleShiftTable load(const io::WeightStore& weights, const std::string& name, const Placement& place);
  // shared (B, rows*D) + the table: a block's modulation.
  Tensor add_to(const Tensor& shared) const;
  // embedded (R, D) repeated `rows` times + the table: (R, rows*D).
  Tensor add_to_repeated(const Tensor& embedded) const;

 private:
  Placement place_;
  Tensor table_;  // (rows, D)
};

}  // namespace ditgen::models::nn
