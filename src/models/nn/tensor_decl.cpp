#include "models/nn/tensor_decl.h"

#include <stdexcept>

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

std::string stored_name(const io::WeightStore& weights, const TensorDecl& d) {
  if (weights.contains(d.name)) return d.name;
  for (const std::string& name : d.legacy_names)
    if (weights.contains(name)) return name;
  std::string legacy;
  for (const std::string& name : d.legacy_names) legacy += (legacy.empty() ? "" : ", ") + ("'" + name + "'");
  throw ModelError(weights.dir() + ": missing tensor '" + d.name + "'" +
                   (legacy.empty() ? "" : " (or legacy " + legacy + ")"));
}

void check_tensors(const io::WeightStore& weights, const TensorDecls& decls) {
  for (const TensorDecl& d : decls) {
    const std::string name = d.legacy_names.empty() ? d.name : stored_name(weights, d);
    const Shape& stored_shape = weights.info(name).shape;  // ModelError naming the tensor when absent
    const bool alt = !d.alt_shape.empty() && stored_shape == d.alt_shape;
    if (!d.alt_shape.empty() && !alt && stored_shape != d.shape)
      throw ModelError(weights.file_of(name) + ": tensor '" + name + "' has shape " + shape_str(stored_shape) +
                       ", expected " + shape_str(d.shape) + " or " + shape_str(d.alt_shape) + " (from config.json)");
    weights.expect(name, alt ? d.alt_shape : d.shape);  // floating, of this shape
    if (!d.dtype) continue;
    const io::StoredType stored = weights.info(name).type;
    DType found{};
    if (!io::tensor_dtype(stored, found) || found != *d.dtype)
      throw ModelError(weights.file_of(name) + ": tensor '" + name + "' has dtype " + io::stored_type_name(stored) +
                       ", expected " + dtype_name(*d.dtype));
  }
}

Tensor load_declared(const io::WeightStore& weights, const TensorDecl& d) {
  const Tensor stored = weights.load(d.legacy_names.empty() ? d.name : stored_name(weights, d));
  return stored.shape() == d.shape ? stored : stored.reshape(d.shape);
}

Tensor load_as(const io::WeightStore& weights, const TensorDecl& d, const Placement& place, Placed how) {
  const std::string name = d.legacy_names.empty() ? d.name : stored_name(weights, d);
  // A GEMM weight stored as declared goes through load_matrix: a GGUF
  // weight in a block format stays in its blocks (never dequantized whole).
  if (how == Placed::kMatrix && weights.info(name).shape == d.shape) return load_matrix(weights, name, place);
  const Tensor source = load_declared(weights, d);
  switch (how) {
    case Placed::kPut: return release_source(weights, name, source, place.put(source));
    case Placed::kConv: return release_source(weights, name, source, place.conv(source));
    case Placed::kMatrix: return release_source(weights, name, source, place.matrix(source));
    case Placed::kTable: return release_source(weights, name, source, place.table(source));
  }
  throw std::logic_error("load_as: unknown placement");
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
