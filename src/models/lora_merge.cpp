// See lora_merge.h: each change sliced to the part being loaded, then added
// by ops/lora_delta.h.
#include "models/lora_merge.h"

#include <stdexcept>

#include "ops/lora_delta.h"
#include "util/profile.h"

namespace ditgen::models {

void LoraMerge::add(std::shared_ptr<const io::LoraFile> file, const io::LoraTarget& target, double scale,
                    bool at_runtime) {
  if (at_runtime && target.kind != io::LoraKind::kLowRank)
    throw std::logic_error("LoraMerge: only a low-rank change applies at run time (" + target.tensor + ")");
  auto& into = at_runtime ? at_runtime_ : by_tensor_;
  into[target.tensor].push_back({&target, static_cast<float>(scale * target.scaling)});
  if (files_.empty() || files_.back() != file) files_.push_back(std::move(file));
}

bool LoraMerge::changes(const std::string& name) const {
  if (at_runtime_.count(name)) {
    const std::lock_guard<std::mutex> lock(taken_mutex_);
    loaded_.insert(name);
  }
  return by_tensor_.count(name) != 0;
}

std::vector<io::LowRankTerm> LoraMerge::runtime_terms(const std::string& name) const {
  const auto found = at_runtime_.find(name);
  if (found == at_runtime_.end()) return {};
  {
    const std::lock_guard<std::mutex> lock(taken_mutex_);
    taken_.insert(name);
  }
  std::vector<io::LowRankTerm> terms;
  for (const Change& c : found->second) terms.push_back({c.target->a, c.target->b, c.factor});
  return terms;
}

std::vector<std::string> LoraMerge::runtime_untaken() const {
  const std::lock_guard<std::mutex> lock(taken_mutex_);
  std::vector<std::string> untaken;
  for (const std::string& name : loaded_)
    if (!taken_.count(name)) untaken.push_back(name);
  return untaken;
}

void LoraMerge::apply(const std::string& name, Tensor& part, int64_t row_begin, int64_t col_begin) const {
  const auto found = by_tensor_.find(name);
  if (found == by_tensor_.end()) return;
  profile::ScopedTimer timer("lora_merge");
  const int64_t rows = part.ndim() ? part.dim(0) : 1;
  const bool matrix = part.ndim() == 2;
  for (const Change& c : found->second) {
    const io::LoraTarget& t = *c.target;
    if (t.kind == io::LoraKind::kLowRank) {
      if (!matrix) throw std::logic_error("LoraMerge: " + name + " is not a matrix");
      const Tensor b = t.b.slice0(row_begin, row_begin + rows);  // (rows, r)
      const Tensor a = ops::lora_columns(t.a, col_begin, part.dim(1));      // (r, cols)
      ops::lora_merge_(part, a, b, c.factor);
      continue;
    }
    Tensor delta = part.ndim() ? t.delta.slice0(row_begin, row_begin + rows) : t.delta;
    if (matrix) delta = ops::lora_columns(delta, col_begin, part.dim(1));
    ops::lora_add_delta_(part, delta, c.factor);
  }
}

}  // namespace ditgen::models
