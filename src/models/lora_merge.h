// LoRA merged into a transformer's weights as they load (docs/lora.md): the
// io::WeightEdits a WeightStore is given (io/weight_edits.h), so every
// family's tensors take their changes by name in the one loading path, and
// each tp rank its own rows or columns of them.
//
// For a weight W of a low-rank change, W += s · scaling · B A, as diffusers'
// fuse_lora (peft's merge) does, on the float32 part being loaded: a
// column-parallel rank's rows of W take B's rows, a row-parallel rank's
// columns take A's columns. A full delta (or a LoRA's bias) adds s · scaling
// · D, sliced the same way. Several LoRAs add, in the order given. Only the
// tensor being loaded is copied (to float32, then placed as any float32
// weight: converted, packed or quantized), never the model.
//
// A low-rank change added with at_runtime is not merged: the weight loads
// as stored (GGUF blocks stay blocks) and its linear layer takes the pair
// from runtime_terms (models/nn/lora_terms.h) to add factor · (x Aᵀ) Bᵀ
// to its output; only A and B are held, in float32.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "io/lora_file.h"
#include "io/weight_edits.h"

namespace ditgen::models {

class LoraMerge final : public io::WeightEdits {
 public:
  // Adds `target`'s change at strength `scale` (times its own scaling);
  // `file` holds it and is kept alive. at_runtime (a low-rank change only):
  // applied beside the weight at run time instead of merged.
  void add(std::shared_ptr<const io::LoraFile> file, const io::LoraTarget& target, double scale,
           bool at_runtime = false);
  bool empty() const { return by_tensor_.empty() && at_runtime_.empty(); }

  bool changes(const std::string& name) const override;
  void apply(const std::string& name, Tensor& part, int64_t row_begin, int64_t col_begin) const override;
  std::vector<io::LowRankTerm> runtime_terms(const std::string& name) const override;
  std::vector<std::string> runtime_untaken() const override;

 private:
  struct Change {
    const io::LoraTarget* target;
    float factor;  // the strength times the target's scaling
  };
  std::map<std::string, std::vector<Change>> by_tensor_;   // merged at load
  std::map<std::string, std::vector<Change>> at_runtime_;  // low-rank, beside the weight
  std::vector<std::shared_ptr<const io::LoraFile>> files_;
  mutable std::mutex taken_mutex_;
  mutable std::set<std::string> loaded_;  // at_runtime_'s tensors the store loaded (asked changes())
  mutable std::set<std::string> taken_;   // at_runtime_'s tensors a layer asked for
};

}  // namespace ditgen::models
