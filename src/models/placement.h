// Where a model's weights and activations live: the device and the element
// type of compute (model.dtype resolved, DESIGN.md §3). Weights are moved
// there once at load; forward passes take and return host float32 tensors,
// so pipelines and schedulers stay on the CPU whatever the device.
#pragma once
#include "tensor/tensor.h"

namespace ditgen::models {

struct Placement {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;  // CPU: float32 only

  // A weight or table in this placement (no copy when already there: CPU
  // float32 weights stay borrowed from the mmapped file).
  Tensor put(const Tensor& t) const { return t.to(device, dtype); }
  Tensor empty(Shape shape) const { return Tensor::empty(std::move(shape), device, dtype); }
};

}  // namespace ditgen::models
