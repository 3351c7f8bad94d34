// Where a model's weights and activations live: the device and the element
// type of compute (model.dtype resolved, DESIGN.md §3). Weights are moved
// there once at load; forward passes take and return host float32 tensors,
// so pipelines and schedulers stay on the CPU whatever the device.
//
// Two kinds of weight: matrix() for the GEMM weights (what ops::linear /
// linear_into take as w), put() for everything else (biases, tables, conv
// weights, norms). On the CPU, which computes in float32, a GEMM weight stays
// in its stored dtype, float32, bfloat16 or float16, borrowed from the
// mmapped file (the CPU GEMM widens 16-bit rows block by block), unless
// cpu_matrix_dtype asks for another (the text encoder in bfloat16: a float32
// checkpoint converted once, so its weights take half the memory); the rest
// is converted once to float32 here. On CUDA both convert once, at upload,
// to the compute dtype.
#pragma once
#include <optional>
#include <string>

#include "io/safetensors.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct Placement {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;  // CPU: float32 only
  // CPU only: the dtype GEMM weights are kept in; none = as stored.
  std::optional<DType> cpu_matrix_dtype;

  Placement() = default;
  Placement(Device d, DType t, std::optional<DType> matrices = std::nullopt)
      : device(d), dtype(t), cpu_matrix_dtype(matrices) {}

  // A weight or table in this placement (no copy when already there: CPU
  // float32 weights stay borrowed from the mmapped file).
  Tensor put(const Tensor& t) const { return t.to(device, dtype); }
  // A GEMM weight: on the CPU as stored when that is a floating dtype (no
  // copy, no widening) or as cpu_matrix_dtype, else as put().
  Tensor matrix(const Tensor& t) const {
    if (device != Device::kCPU || !is_floating(t.dtype())) return put(t);
    return t.to(device, cpu_matrix_dtype.value_or(t.dtype()));
  }
  Tensor empty(Shape shape) const { return Tensor::empty(std::move(shape), device, dtype); }
};

// The GEMM weight `name` of `weights` placed by place.matrix(); when that
// made a copy (a conversion or an upload), the file pages the source was
// read from are released from this process at once, so loading a model
// tensor by tensor never holds the whole source checkpoint resident.
inline Tensor load_matrix(const io::WeightStore& weights, const std::string& name, const Placement& place) {
  const Tensor source = weights.load(name);
  Tensor placed = place.matrix(source);
  if (placed.raw() != source.raw()) weights.release_pages(name);
  return placed;
}

}  // namespace ditgen::models
