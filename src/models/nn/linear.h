// Linear layers, held whole or split over a tensor-parallel group
// (docs/design.md §4, Megatron-style; the collectives are parallel/
// tensor_parallel.h's). Each owns its tp split: it loads only this rank's
// part of the stored weight, in the compute dtype as stored (borrowed from
// the mmapped file) or converted or packed once (models/placement.h:
// place_matrix, whose source pages are released as they are converted),
// and its bias through Placement::put.
//   Linear                whole on every rank (embedders, projections
//                         outside the blocks).
//   ColumnParallelLinear  rows column_split(out) of the weight: this
//                         rank's heads or features, computed without
//                         communication. A layer may be a band of rows of
//                         a wider stored weight (first_row: adaLN-Zero's
//                         six chunks, a gated MLP's two halves).
//   RowParallelLinear     the matching input columns; its partial sums are
//                         all-reduced and the bias, held whole, is added
//                         once after that (also with tp = 1, so the
//                         arithmetic is the same whatever the layout).
// Names: `prefix` + "weight" / "bias" ("transformer_blocks.0.attn1.to_q.").
//
// A LoRA applied at run time to a layer's weight (nn/lora_terms.h: every
// layer asks the store by its weight's name) adds Σ factor · (x Aᵀ) Bᵀ to
// x wᵀ + b before the layer's activation, each layer holding the share of
// A and B that matches its share of w; a row-parallel layer adds its
// partial product before the all-reduce, so it is summed once.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/lora_terms.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "ops/ops.h"
#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// The declarations of a linear layer of `out` x `in` (as stored, whole),
// split over tp as `weight` and `bias` say.
TensorDecls linear_tensors(const std::string& prefix, int64_t out, int64_t in, TpSplit weight = TpSplit::kWhole,
                           TpSplit bias = TpSplit::kWhole);

// act(x w^T + b + lora's terms): ops::linear, with the run-time LoRA's
// terms added before the activation when the layer has any.
Tensor linear_with_lora(const Tensor& x, const Tensor& w, const Tensor& b, const LoraTerms& lora,
                        ops::Activation act);

class Linear {
 public:
  static Linear load(const io::WeightStore& weights, const std::string& prefix, const Placement& place);
  // act(x (..., K) w^T + b): (..., N).
  Tensor operator()(const Tensor& x, ops::Activation act = ops::Activation::kNone) const {
    return linear_with_lora(x, weight, bias, lora, act);
  }

  Tensor weight;  // (N, K)
  Tensor bias;    // (N)
  LoraTerms lora;  // run-time LoRA of the weight; usually none
};

class ColumnParallelLinear {
 public:
  // A layer of `out` x `in`, both tensors split by rows.
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in) {
    return linear_tensors(prefix, out, in, TpSplit::kRows, TpSplit::kRows);
  }
  // Rows [first_row, first_row + out) of the stored weight are this layer
  // (the whole weight by default); this rank loads column_split(out, tp)
  // of them. tp (null = size 1) must divide out.
  static ColumnParallelLinear load(const io::WeightStore& weights, const std::string& prefix, int64_t out,
                                   parallel::Communicator* tp, const Placement& place, int64_t first_row = 0);
  // (..., N/tp): this rank's outputs.
  Tensor operator()(const Tensor& x, ops::Activation act = ops::Activation::kNone) const {
    return linear_with_lora(x, weight, bias, lora, act);
  }
  // The same into columns [col, col + N/tp) of y, a (rows, W) tensor.
  void into(const Tensor& x, Tensor& y, int64_t col) const;

  Tensor weight;  // (N/tp, K)
  Tensor bias;    // (N/tp)
  LoraTerms lora;  // run-time LoRA: B's rows of this layer's rows
};

class RowParallelLinear {
 public:
  // A layer of `out` x `in`: the weight split by columns, the bias whole.
  static TensorDecls tensors(const std::string& prefix, int64_t out, int64_t in) {
    return linear_tensors(prefix, out, in, TpSplit::kColumns, TpSplit::kWhole);
  }
  // This rank's input columns column_split(in, tp) of the weight, the bias
  // whole. The communicator must outlive the layer.
  static RowParallelLinear load(const io::WeightStore& weights, const std::string& prefix, int64_t in,
                                parallel::Communicator* tp, const Placement& place);
  // x (..., K/tp) -> (..., N), summed over the tp group.
  Tensor operator()(const Tensor& x) const;

  Tensor weight;  // (N, K/tp)
  Tensor bias;    // (N), added once after the all-reduce
  LoraTerms lora;  // run-time LoRA: A's columns of this layer's columns

 private:
  parallel::Communicator* tp_ = nullptr;
};

}  // namespace ditgen::models::nn
