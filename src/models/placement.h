// Where a model's weights and activations live: the device and the element
// type of compute (model.dtype resolved, DESIGN.md §3). Weights are moved
// there once at load; forward passes take and return host float32 tensors,
// so pipelines and schedulers stay on the CPU whatever the device.
//
// Two kinds of weight: matrix() for the GEMM weights (what ops::linear /
// linear_into take as w), put() for everything else (biases, tables, conv
// weights, norms). On the CPU, which computes in float32, a GEMM weight stays
// in its stored dtype, float32, bfloat16 or float16, borrowed from the
// mmapped file (the CPU GEMM widens 16-bit rows block by block), while the
// rest is converted once to float32 here. On CUDA both convert once, at
// upload, to the compute dtype.
#pragma once
#include "tensor/tensor.h"

namespace ditgen::models {

struct Placement {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;  // CPU: float32 only

  // A weight or table in this placement (no copy when already there: CPU
  // float32 weights stay borrowed from the mmapped file).
  Tensor put(const Tensor& t) const { return t.to(device, dtype); }
  // A GEMM weight: on the CPU as stored when that is a floating dtype (no
  // copy, no widening), else as put().
  Tensor matrix(const Tensor& t) const {
    return device == Device::kCPU && is_floating(t.dtype()) ? t.to(device, t.dtype()) : put(t);
  }
  Tensor empty(Shape shape) const { return Tensor::empty(std::move(shape), device, dtype); }
};

}  // namespace ditgen::models
