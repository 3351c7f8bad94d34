// An MM-DiT's joint sequence (CogVideoX): the text's rows and the video's
// tokens form one sequence, text first, that every block's self-attention,
// norms and feed-forward run over; the two kinds of rows differ only in
// their adaLN modulation (and in rotary positions, the video's only: the
// caller's hook, its text rows' table entries the identity). Under sp and
// PipeFusion a rank holds a contiguous band of the sequence, the text rows
// falling to the first ranks, so either kind may be absent from a band.
//   JointRows        a band's text rows and video rows, held apart between
//                    the branches; split from and joined into one band
//                    (ops/rows.h).
//   JointNormZero    CogVideoXLayerNormZero: a linear of SiLU(emb) to (B,
//                    6D) (an nn::AdaLnZero, split over tp) and a LayerNorm
//                    with affine. The video rows take the first (shift,
//                    scale, gate) triple, the text rows the second. The
//                    affine is folded into the modulation per forward on
//                    the host (fold_norm_affine), so one modulated LayerNorm
//                    without affine runs.
//   JointModulation  what it makes: the band with each kind of row
//                    normalised and modulated by its triple, and a branch's
//                    output added back to each kind under its gate.
//   JointAttention   the self-attention over the joint sequence (an
//                    nn::Attention: the core attends a band's rows over the
//                    whole sequence).
// Names: "norm1." (linear., norm.), "attn1." (to_q, to_k, to_v, to_out.0,
// norm_q, norm_k).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/attention.h"
#include "models/nn/modulation.h"
#include "models/nn/norm.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

struct JointRows {
  Tensor text;   // (B, Pt, D)
  Tensor video;  // (B, Pv, D)
  // band (B, P, D) whose first `text_rows` rows are text, the rest video.
  static JointRows split(const Tensor& band, int64_t text_rows);
  // [text; video]: (B, Pt + Pv, D).
  Tensor joined() const;
};

class JointModulation {
 public:
  // The triple each kind of row takes.
  static constexpr Triple kVideo = Triple::kFirst, kText = Triple::kSecond;

  // mod (B, 6D) on the rows' device, D = dim; the LayerNorm's eps.
  JointModulation(Tensor mod, int64_t dim, float eps) : mod_(std::move(mod), dim), eps_(eps) {}
  // [text; video] (B, Pt + Pv, D), each kind LayerNormed (no affine) and
  // modulated by its triple's shift and scale.
  Tensor normalize(const JointRows& rows) const;
  // Each kind += its triple's gate * its rows of out (B, Pt + Pv, D).
  void add_gated(JointRows& rows, const Tensor& out) const;

 private:
  Modulation mod_;
  float eps_;
};

// mod (B, K*D) with LayerNorm(x) w + b's affine (`norm`, host float32)
// folded into each (shift, scale) chunk pair at `pairs` (chunk indices): a
// LayerNorm without affine followed by the modulation then gives (LN(x) w +
// b)(1 + s) + t, by s' = w (1 + s) - 1, t' = b (1 + s) + t (made on the
// host, equal up to float rounding). The result on `place`.
Tensor fold_norm_affine(const Tensor& mod, const LayerNorm& norm, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                        const Placement& place);

class JointNormZero {
 public:
  // `cond_dim`: the conditioning's width (CogVideoX's time_embed_dim).
  static TensorDecls tensors(const std::string& prefix, int64_t dim, int64_t cond_dim);
  // The linear's D/tp rows of each chunk (tp null = size 1); the
  // LayerNorm's affine on the host.
  static JointNormZero load(const io::WeightStore& weights, const std::string& prefix, int64_t dim, float eps,
                            parallel::Communicator* tp, const Placement& place);
  // emb (B, cond_dim) -> the joint modulation, the affine folded in.
  JointModulation operator()(const Tensor& emb) const;

 private:
  AdaLnZero linear_;  // (6D, cond_dim): shift, scale, gate of the video rows, then of the text rows
  LayerNorm norm_;    // (D), host float32
  Placement place_;
  float eps_ = 1e-5f;
};

class JointAttention {
 public:
  static TensorDecls tensors(const std::string& prefix, const AttentionDims& dims) {
    return Attention::tensors(prefix, dims);
  }
  // This rank's heads (tp null = size 1; it must outlive the module).
  static JointAttention load(const io::WeightStore& weights, const std::string& prefix, const AttentionDims& dims,
                             parallel::Communicator* tp, const Placement& place) {
    return {Attention::load(weights, prefix, dims, tp, place)};
  }
  // joint (B, P, D): a band's modulated rows -> (B, P, D), attended over the
  // whole sequence by `core`, q and k rotated by `rotary` when given.
  Tensor operator()(const Tensor& joint, const AttentionCore& core, const Rotary* rotary) const {
    return attention.self_attention(joint, core, nullptr, rotary);
  }

  Attention attention;  // to_q/k/v (Dl, D), to_out (D, Dl), norm_q/k
};

}  // namespace ditgen::models::nn
