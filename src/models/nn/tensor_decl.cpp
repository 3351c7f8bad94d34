#include "models/nn/tensor_decl.h"

#include "util/error.h"

namespace ditgen::models::nn {

void append(TensorDecls& all, TensorDecls more) {
  for (TensorDecl& d : more) all.push_back(std::move(d));
}

ElementCount count_elements(const TensorDecls& decls) {
  ElementCount n;
  for (const TensorDecl& d : decls) {
    double elements = 1;  // in double: a config's absurd sizes must not overflow an integer (plan reads any config)
    for (int64_t extent : d.shape) elements *= static_cast<double>(extent);
    (d.split == TpSplit::kWhole ? n.whole : n.split) += elements;
  }
  return n;
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

void check_model_tensors(const io::WeightStore& weights, TensorDecls stem, int64_t layers,
                         const std::function<TensorDecls(int64_t)>& layer, const std::vector<std::string>& lists,
                         const std::string& probe) {
  for (int64_t i = 0; i < layers; ++i) append(stem, layer(i));
  check_tensors(weights, stem);
  for (const std::string& list : lists)
    if (weights.contains(list + "." + std::to_string(layers) + "." + probe))
      throw ModelError(weights.dir() + ": holds more " + list + " than num_layers = " + std::to_string(layers) +
                       " in config.json");
}

}  // namespace ditgen::models::nn
