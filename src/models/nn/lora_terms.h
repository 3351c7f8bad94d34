// LoRA applied at run time by a linear layer (docs/lora.md, lora_apply
// "runtime"): beside its unchanged weight W (float, int8 or GGUF blocks),
//   y = x Wᵀ + b + Σ_i factor_i · (x A_iᵀ) B_iᵀ,
// factor_i being LoRA i's strength times alpha_i / r_i, added before any
// activation the layer applies (nn/linear.h). Every family's linear layers
// take it by tensor name from the weight store (io/weight_edits.h), so no
// family has LoRA code.
//
// Under tensor parallelism a layer holds its share of each pair as it
// holds its share of W: a column-parallel layer (its rows of W) B's rows,
// A whole; a row-parallel layer (its input columns) A's columns, B whole,
// its partial product summed with the others' by the layer's all-reduce
// and the bias added once after it. A and B are small (r x in, out x r):
// they are held in the activations' dtype (float32 on the CPU, the compute
// dtype on CUDA), and the only temporary is the (rows, r) product x Aᵀ.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

class LoraTerms {
 public:
  // The pairs of the weight `name` applied at run time, sliced to rows
  // [row_begin, row_end) of its output (B's rows) and columns [col_begin,
  // col_end) of its input (A's columns), an end of -1 meaning all of them;
  // none when it has none.
  // A layer whose weight is the stored one's rows reordered gives
  // `reorder_b`, which reorders B's rows (after the slicing) alike.
  static LoraTerms load(const io::WeightStore& weights, const std::string& name, int64_t row_begin, int64_t row_end,
                        int64_t col_begin, int64_t col_end, const Placement& place,
                        const std::function<Tensor(const Tensor&)>& reorder_b = {});
  bool empty() const { return terms_.empty(); }
  // y (..., N) += Σ factor · (x (..., K) Aᵀ) Bᵀ.
  void add_to(const Tensor& x, Tensor& y) const;

 private:
  struct Term {
    Tensor a;  // (r, K): this layer's columns of A
    Tensor b;  // (N, r): this layer's rows of B
    float factor;
  };
  std::vector<Term> terms_;
};

}  // namespace ditgen::models::nn
