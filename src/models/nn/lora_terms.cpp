// See lora_terms.h: the store's pairs sliced once at load, two GEMMs each
// per call (ops/lora_delta.h).
#include "models/nn/lora_terms.h"

#include "ops/lora_delta.h"
#include "util/profile.h"

namespace ditgen::models::nn {

LoraTerms LoraTerms::load(const io::WeightStore& weights, const std::string& name, int64_t row_begin,
                          int64_t row_end, int64_t col_begin, int64_t col_end, const Placement& place,
                          const std::function<Tensor(const Tensor&)>& reorder_b) {
  LoraTerms out;
  for (const io::LowRankTerm& t : weights.runtime_terms(name)) {
    const int64_t rows_end = row_end < 0 ? t.b.dim(0) : row_end, cols_end = col_end < 0 ? t.a.dim(1) : col_end;
    Tensor b = t.b.slice0(row_begin, rows_end);                                // (N, r)
    if (reorder_b) b = reorder_b(b);
    const Tensor a = ops::lora_columns(t.a, col_begin, cols_end - col_begin);  // (r, K)
    out.terms_.push_back({place.put(a), place.put(b), t.factor});
  }
  return out;
}

void LoraTerms::add_to(const Tensor& x, Tensor& y) const {
  profile::ScopedTimer timer("lora_runtime");
  for (const Term& t : terms_) ops::lora_apply_(x, t.a, t.b, t.factor, y);
}

}  // namespace ditgen::models::nn
