#include "models/nn/linear.h"

#include "parallel/tensor_parallel.h"

namespace ditgen::models::nn {

TensorDecls linear_tensors(const std::string& prefix, int64_t out, int64_t in, TpSplit weight, TpSplit bias) {
  return {{prefix + "weight", {out, in}, weight}, {prefix + "bias", {out}, bias}};
}

Linear Linear::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  return {load_matrix(w, prefix + "weight", place), place.put(w.load(prefix + "bias"))};
}

ColumnParallelLinear ColumnParallelLinear::load(const io::WeightStore& w, const std::string& prefix, int64_t out,
                                                parallel::Communicator* tp, const Placement& place,
                                                int64_t first_row) {
  const parallel::Range mine = parallel::column_split(out, tp);
  const int64_t begin = first_row + mine.begin, end = first_row + mine.end;
  const std::string weight = prefix + "weight";
  // Rows of the file are a view of it (zero copy); placing may convert or pack.
  return {load_matrix_rows(w, weight, begin, end, place), place.put(w.load_rows(prefix + "bias", begin, end))};
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
  layer.tp_ = tp;
  return layer;
}

Tensor RowParallelLinear::operator()(const Tensor& x) const {
  return parallel::row_parallel_linear(tp_, x, weight, bias);
}

}  // namespace ditgen::models::nn
