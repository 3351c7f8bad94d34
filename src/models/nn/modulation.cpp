#include "models/nn/modulation.h"

#include <stdexcept>
#include <string>

#include "ops/ops.h"
#include "parallel/tensor_parallel.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

// Column offsets of a triple's chunks, in units of D.
int64_t shift_chunk(Triple t) { return 3 * static_cast<int64_t>(t); }

}  // namespace

Tensor Modulation::rows_of(const Tensor& x) const {
  if (mod_.dim(0) == x.dim(0)) return x;
  if (x.ndim() != 3 || mod_.dim(0) != x.dim(0) * x.dim(1))
    throw std::logic_error("Modulation: " + std::to_string(mod_.dim(0)) + " rows for x " + shape_str(x.shape()));
  return x.reshape({x.dim(0) * x.dim(1), 1, x.dim(2)});  // a view: one token a row
}

void Modulation::normalize(const Tensor& x, Triple triple, float eps, Tensor& out) const {
  profile::ScopedTimer t("layer_norm");
  const int64_t shift = shift_chunk(triple);
  Tensor out_rows = rows_of(out);
  ops::layer_norm_modulate(rows_of(x), mod_, shift * dim_, (shift + 1) * dim_, eps, out_rows);
}

void Modulation::add_gated(Tensor& x, const Tensor& y, Triple triple) const {
  profile::ScopedTimer t("residual");
  Tensor x_rows = rows_of(x);
  ops::gated_residual_(x_rows, rows_of(y), mod_, (shift_chunk(triple) + 2) * dim_);
}

TensorDecls AdaLnZero::tensors(const std::string& prefix, int64_t dim, int64_t chunks, int64_t cond_dim) {
  return ColumnParallelLinear::tensors(prefix, chunks * dim, cond_dim > 0 ? cond_dim : dim);  // each chunk's rows split alike
}

AdaLnZero AdaLnZero::load(const io::WeightStore& w, const std::string& prefix, int64_t dim,
                          parallel::Communicator* tp, const Placement& place, int64_t chunks) {
  AdaLnZero m;
  m.tp_ = tp;
  m.place_ = place;
  m.local_ = dim / parallel::group_size(tp);
  for (int64_t c = 0; c < chunks; ++c)
    m.chunks_.push_back(ColumnParallelLinear::load(w, prefix, dim, tp, place, c * dim));
  return m;
}

Tensor AdaLnZero::operator()(const Tensor& conditioning) const {
  profile::ScopedTimer t("adaln");
  const int64_t chunks = static_cast<int64_t>(chunks_.size()), local = local_;
  const Tensor act = ops::silu(conditioning);
  Tensor mine = place_.empty({conditioning.dim(0), chunks * local});  // this rank's columns of each chunk
  for (int64_t c = 0; c < chunks; ++c) chunks_[static_cast<size_t>(c)].into(act, mine, c * local);
  return parallel::gather_chunk_columns(tp_, mine, chunks);
}

TensorDecls AdaLnSingle::tensors(const AdaLnSingleNames& names, int64_t dim, int64_t chunks, int64_t channels) {
  TensorDecls t = linear_tensors(names.projection, chunks * dim, dim);
  append(t, TimestepEmbedding::tensors(names.embedder, dim, channels));
  return t;
}

AdaLnSingle AdaLnSingle::load(const io::WeightStore& w, const AdaLnSingleNames& names, const Placement& place) {
  AdaLnSingle m;
  m.timestep_ = TimestepEmbedding::load(w, names.embedder, place);
  m.linear_ = Linear::load(w, names.projection, place);
  return m;
}

Tensor AdaLnSingle::embed(const std::vector<float>& timesteps, const Placement& place) const {
  return timestep_(TimestepEmbedding::sinusoid(timesteps, 0.0f, place, timestep_.channels()));
}

Tensor AdaLnSingle::operator()(const Tensor& embedded) const {
  profile::ScopedTimer t("adaln");
  return linear_(ops::silu(embedded));
}

TensorDecls ScaleShiftTable::tensors(const std::string& name, int64_t rows, int64_t dim, bool leading_one) {
  return {{name, leading_one ? Shape{1, rows, dim} : Shape{rows, dim}}};
}

ScaleShiftTable ScaleShiftTable::load(const io::WeightStore& w, const std::string& name, const Placement& place) {
  ScaleShiftTable s;
  s.place_ = place;
  const Tensor t = w.load(name);  // (rows, D) or (1, rows, D)
  s.table_ = place.put(t.reshape({t.dim(t.ndim() - 2), t.dim(t.ndim() - 1)}));
  return s;
}

Tensor ScaleShiftTable::add_to(const Tensor& shared) const {
  profile::ScopedTimer t("adaln");
  Tensor mod = shared.clone();
  ops::add_broadcast_(mod, table_);
  return mod;
}

Tensor ScaleShiftTable::add_to_repeated(const Tensor& embedded) const {  // timed by its caller (the final layer)
  const int64_t rows = embedded.dim(0), d = embedded.dim(1), k = table_.dim(0);
  Tensor mod = place_.empty({rows, k * d});
  for (int64_t r = 0; r < k; ++r) ops::copy_rows(embedded, 0, d, mod, r * d, k * d, rows, d);
  ops::add_broadcast_(mod, table_);
  return mod;
}

}  // namespace ditgen::models::nn
