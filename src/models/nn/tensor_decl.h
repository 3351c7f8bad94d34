// What a module reads from the weight store, declared before anything is
// loaded (docs/design.md §6: every weight's name, shape and dtype is validated
// against the config before any compute). Each module of models/nn/ lists
// its tensors with a static tensors(prefix, dims), and how tp splits each;
// a model appends those of its modules and checks them all here, in one
// place, then loads. A family's spec counts its weights from the same
// declarations (what each rank holds under tp), so the two cannot drift.
// A tensor that older checkpoints store under another name (AutoencoderKL's
// pre-0.14 attention, T5's encoder.embed_tokens) or in another shape of the
// same elements (a 1x1 conv's (C, C, 1, 1) for a linear's (C, C)) declares
// those alternatives here too, and a module loads whichever the store holds
// through load_declared, so each name is written in one place.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// How tensor parallelism splits a tensor (nn/linear.h).
enum class TpSplit {
  kWhole,    // every rank holds all of it
  kRows,     // each rank its rows: a column-parallel layer's weight and bias
  kColumns,  // each rank its input columns: a row-parallel layer's weight
};

struct TensorDecl {
  std::string name;            // as stored: "transformer_blocks.3.attn1.to_q.weight"
  Shape shape;                 // as stored, whole (before any tp split)
  TpSplit split = TpSplit::kWhole;
  // The stored dtype it must have; none = any floating dtype, converted at
  // load as the model's Placement says (models/placement.h).
  std::optional<DType> dtype = std::nullopt;
  // Other names the same tensor is stored under by older checkpoints, tried
  // in order after `name` ("attentions.0.query.weight" for ".to_q.weight").
  std::vector<std::string> legacy_names = {};
  // Another stored shape of the same elements, accepted and read as `shape`
  // (a 1x1 conv's (C, C, 1, 1) for a linear's (C, C)); empty: none.
  Shape alt_shape = {};
};
using TensorDecls = std::vector<TensorDecl>;

// Appends `more` to `all`.
void append(TensorDecls& all, TensorDecls more);

// Elements of declared tensors by how tp splits them: a rank holds
// split / tp + whole (what `plan` and the parameter counts read).
struct ElementCount {
  double split = 0, whole = 0;
  double total() const { return split + whole; }
};
ElementCount count_elements(const TensorDecls& decls);

// Checks every declared tensor against the store: present (under its name
// or a legacy one), of its shape (or its alt_shape), floating and of its
// dtype when one is declared. ModelError naming the file and the tensor
// otherwise; nothing is loaded.
void check_tensors(const io::WeightStore& weights, const TensorDecls& decls);

// The name `decl` is stored under: its name, else the first of its legacy
// names the store holds; ModelError "<dir>: missing tensor '<name>' (or
// legacy '<a>', ...)" when none is.
std::string stored_name(const io::WeightStore& weights, const TensorDecl& decl);

// The declared tensor as stored (a view of the file), read as decl.shape
// (an alt_shape tensor reshaped). For a module's load, after check_tensors.
Tensor load_declared(const io::WeightStore& weights, const TensorDecl& decl);

// Which of Placement's methods puts a weight where it computes.
enum class Placed { kPut, kConv, kMatrix, kTable };

// load_declared, placed on `place` as `how` says, its file pages released
// when that made a copy (release_source). A kMatrix tensor stored in its
// declared shape is read by load_matrix (models/placement.h): a GGUF
// weight in a block format stays in its blocks for the CPU GEMM.
Tensor load_as(const io::WeightStore& weights, const TensorDecl& decl, const Placement& place, Placed how);

// A model's tensors checked before anything loads: `stem` and each of its
// `layers` layers' (layer(i)) as check_tensors does; then ModelError when
// the store holds layer `layers` of one of `lists` ("transformer_blocks"),
// more layers than config.json's num_layers, probed by `probe` (a tensor
// every layer holds: "scale_shift_table").
void check_model_tensors(const io::WeightStore& weights, TensorDecls stem, int64_t layers,
                         const std::function<TensorDecls(int64_t)>& layer, const std::vector<std::string>& lists,
                         const std::string& probe);

}  // namespace ditgen::models::nn
