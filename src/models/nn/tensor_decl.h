// What a module reads from the weight store, declared before anything is
// loaded (DESIGN.md §6: every weight's name, shape and dtype is validated
// against the config before any compute). Each module of models/nn/ lists
// its tensors with a static tensors(prefix, dims); a model appends those of
// its modules and checks them all here, in one place, then loads.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

struct TensorDecl {
  std::string name;            // as stored: "transformer_blocks.3.attn1.to_q.weight"
  Shape shape;                 // as stored, whole (before any tp split)
  // The stored dtype it must have; none = any floating dtype, converted at
  // load as the model's Placement says (models/placement.h).
  std::optional<DType> dtype = std::nullopt;
};
using TensorDecls = std::vector<TensorDecl>;

// Appends `more` to `all`.
void append(TensorDecls& all, TensorDecls more);

// Checks every declared tensor against the store: present, of its shape,
// floating and of its dtype when one is declared. ModelError naming the
// file and the tensor otherwise; nothing is loaded.
void check_tensors(const io::WeightStore& weights, const TensorDecls& decls);

// ModelError when the store holds layer `layers` of the list `list`
// ("transformer_blocks"): more layers than config.json's num_layers.
// `probe` is a tensor every layer holds ("scale_shift_table").
void reject_extra_layers(const io::WeightStore& weights, const std::string& list, int64_t layers,
                         const std::string& probe);

}  // namespace ditgen::models::nn
