// Building blocks of the LoRA tests through the weight store
// (test_lora_merge.cpp, test_lora_runtime.cpp): seeded random tensors and
// the io::LoraTarget a LoRA file's reader would give.
#pragma once
#include <random>
#include <string>

#include "io/lora_file.h"
#include "tensor/tensor.h"

namespace ditgen::testing {

// Normal values of spread `sd`, from `seed`.
inline Tensor random_normal(Shape shape, uint32_t seed, float sd = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape));
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = d(gen);
  return t;
}

// A low-rank change of `tensor`: a (r, in), b (out, r), peft's scaling.
inline io::LoraTarget low_rank_target(const std::string& tensor, const Tensor& a, const Tensor& b, double scaling) {
  io::LoraTarget t;
  t.tensor = tensor;
  t.a = a;
  t.b = b;
  t.rank = a.dim(0);
  t.scaling = scaling;
  return t;
}

}  // namespace ditgen::testing
