// See lora_merge.h: each change sliced to the part being loaded, then added
// by ops/lora_delta.h.
#include "models/lora_merge.h"

#include <cstring>
#include <stdexcept>

#include "ops/lora_delta.h"

namespace ditgen::models {
namespace {

// Columns [begin, begin + count) of the 2-D float32 `t` (all of it when
// they are): tp's row-parallel share of an A or of a full delta.
Tensor columns(const Tensor& t, int64_t begin, int64_t count) {
  if (begin == 0 && count == t.dim(1)) return t;
  if (begin < 0 || begin + count > t.dim(1))
    throw std::out_of_range("LoraMerge: columns [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                            ") of " + shape_str(t.shape()));
  Tensor out = Tensor::empty({t.dim(0), count});
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(out.data() + r * count, t.data() + r * t.dim(1) + begin, static_cast<size_t>(count) * sizeof(float));
  return out;
}

}  // namespace

void LoraMerge::add(std::shared_ptr<const io::LoraFile> file, const io::LoraTarget& target, double scale) {
  by_tensor_[target.tensor].push_back({&target, static_cast<float>(scale * target.scaling)});
  if (files_.empty() || files_.back() != file) files_.push_back(std::move(file));
}

void LoraMerge::apply(const std::string& name, Tensor& part, int64_t row_begin, int64_t col_begin) const {
  const auto found = by_tensor_.find(name);
  if (found == by_tensor_.end()) return;
  const int64_t rows = part.ndim() ? part.dim(0) : 1;
  const bool matrix = part.ndim() == 2;
  for (const Change& c : found->second) {
    const io::LoraTarget& t = *c.target;
    if (t.kind == io::LoraKind::kLowRank) {
      if (!matrix) throw std::logic_error("LoraMerge: " + name + " is not a matrix");
      const Tensor b = t.b.slice0(row_begin, row_begin + rows);  // (rows, r)
      const Tensor a = columns(t.a, col_begin, part.dim(1));      // (r, cols)
      ops::lora_merge_(part, a, b, c.factor);
      continue;
    }
    Tensor delta = part.ndim() ? t.delta.slice0(row_begin, row_begin + rows) : t.delta;
    if (matrix) delta = columns(delta, col_begin, part.dim(1));
    ops::lora_add_delta_(part, delta, c.factor);
  }
}

}  // namespace ditgen::models
