#include "models/nn/tensor_decl.h"

#include "util/error.h"

namespace ditgen::models::nn {

void append(TensorDecls& all, TensorDecls more) {
  for (TensorDecl& d : more) all.push_back(std::move(d));
}

void check_tensors(const io::WeightStore& weights, const TensorDecls& decls) {
  for (const TensorDecl& d : decls) {
    weights.expect(d.name, d.shape);  // present, floating, of this shape
    if (!d.dtype) continue;
    const io::StoredType stored = weights.info(d.name).type;
    DType found{};
    if (!io::tensor_dtype(stored, found) || found != *d.dtype)
      throw ModelError(weights.file_of(d.name) + ": tensor '" + d.name + "' has dtype " +
                       io::stored_type_name(stored) + ", expected " + dtype_name(*d.dtype));
  }
}

void reject_extra_layers(const io::WeightStore& weights, const std::string& list, int64_t layers,
                         const std::string& probe) {
  if (weights.contains(list + "." + std::to_string(layers) + "." + probe))
    throw ModelError(weights.dir() + ": holds more " + list + " than num_layers = " + std::to_string(layers) +
                     " in config.json");
}

}  // namespace ditgen::models::nn
