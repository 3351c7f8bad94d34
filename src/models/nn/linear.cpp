#include "models/nn/linear.h"

#include <stdexcept>

#include "parallel/tensor_parallel.h"

namespace ditgen::models::nn {

TensorDecls linear_tensors(const std::string& prefix, int64_t out, int64_t in, TpSplit weight, TpSplit bias) {
  return {{prefix + "weight", {out, in}, weight}, {prefix + "bias", {out}, bias}};
}

Tensor linear_with_lora(const Tensor& x, const Tensor& w, const Tensor& b, const LoraTerms& lora,
                        ops::Activation act) {
  if (lora.empty()) return ops::linear(x, w, &b, act);
  Tensor y = ops::linear(x, w, &b);
  lora.add_to(x, y);  // before the activation, as peft's LoRA layer adds to the base layer's output
  if (act == ops::Activation::kGeluTanh) ops::gelu_tanh_(y);
  return y;
}

Linear Linear::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  Linear layer{load_matrix(w, prefix + "weight", place), place.put(w.load(prefix + "bias")), {}};
  layer.lora = LoraTerms::load(w, prefix + "weight", 0, -1, 0, -1, place);
  return layer;
}

ColumnParallelLinear ColumnParallelLinear::load(const io::WeightStore& w, const std::string& prefix, int64_t out,
                                                parallel::Communicator* tp, const Placement& place,
                                                int64_t first_row) {
  const parallel::Range mine = parallel::column_split(out, tp);
  const int64_t begin = first_row + mine.begin, end = first_row + mine.end;
  const std::string weight = prefix + "weight";
  // Rows of the file are a view of it (zero copy); placing may convert or pack.
  ColumnParallelLinear layer{load_matrix_rows(w, weight, begin, end, place),
                             place.put(w.load_rows(prefix + "bias", begin, end)), {}};
  layer.lora = LoraTerms::load(w, weight, begin, end, 0, -1, place);
  return layer;
}

void ColumnParallelLinear::into(const Tensor& x, Tensor& y, int64_t col) const {
  if (lora.empty()) return ops::linear_into(x, weight, &bias, y, col);
  const Tensor mine = (*this)(x);  // (..., N/tp), then copied into y's columns
  const int64_t n = weight.dim(0), rows = mine.numel() / n;
  if (y.ndim() < 1 || y.numel() != rows * y.dim(-1))
    throw std::invalid_argument("ColumnParallelLinear::into: " + shape_str(y.shape()) + " for " +
                                std::to_string(rows) + " rows");
  ops::copy_rows(mine, 0, n, y, col, y.dim(-1), rows, n);
}

RowParallelLinear RowParallelLinear::load(const io::WeightStore& w, const std::string& prefix, int64_t in,
                                          parallel::Communicator* tp, const Placement& place) {
  const parallel::Range mine = parallel::column_split(in, tp);
  const std::string weight = prefix + "weight";
  RowParallelLinear layer;
  // Columns are copied out of the file (load_cols releases its pages).
  layer.weight = parallel::group_size(tp) == 1 ? load_matrix(w, weight, place)
                                                : load_matrix_cols(w, weight, mine.begin, mine.end, place);
  layer.bias = place.put(w.load(prefix + "bias"));
  layer.lora = parallel::group_size(tp) == 1 ? LoraTerms::load(w, weight, 0, -1, 0, -1, place)
                                             : LoraTerms::load(w, weight, 0, -1, mine.begin, mine.end, place);
  layer.tp_ = tp;
  return layer;
}

Tensor RowParallelLinear::operator()(const Tensor& x) const {
  if (lora.empty()) return parallel::row_parallel_linear(tp_, x, weight, bias);
  Tensor partial = ops::linear(x, weight, nullptr);  // this rank's input columns
  lora.add_to(x, partial);                           // (x_k A_kᵀ) Bᵀ: summed over the ranks below
  return parallel::row_parallel_sum(tp_, partial, bias);
}

}  // namespace ditgen::models::nn
