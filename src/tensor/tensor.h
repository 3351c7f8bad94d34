// Tensor: a contiguous, row-major float32 array with a shape, sharing its
// storage by reference count. Storage is either owned (64-byte aligned heap)
// or borrowed from something kept alive by the same handle (an mmapped
// safetensors file: float32 weights are used in place, never copied).
// Views (reshape, leading-dimension slices) share storage; ops allocate their
// outputs. The device field is the seam for the CUDA backend.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace ditgen {

enum class Device { kCPU, kCUDA };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 4, 32, 32]"
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised / zero-filled owned storage.
  static Tensor empty(Shape shape);
  static Tensor zeros(Shape shape);
  static Tensor full(Shape shape, float value);
  static Tensor from_vector(Shape shape, const std::vector<float>& values);
  // Borrowed storage: `owner` keeps `data` alive (e.g. an mmapped file).
  static Tensor borrow(float* data, Shape shape, std::shared_ptr<const void> owner);

  bool defined() const { return data_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + ndim() : i); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * sizeof(float); }
  Device device() const { return Device::kCPU; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  float& operator[](int64_t i) { return data_[i]; }
  float operator[](int64_t i) const { return data_[i]; }

  // Same storage, new shape (numel must match; one dim may be -1).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Deep copy into fresh owned storage.
  Tensor clone() const;
  std::vector<float> to_vector() const { return {data_, data_ + numel()}; }

 private:
  std::shared_ptr<const void> storage_;  // keeps data_ alive
  float* data_ = nullptr;
  Shape shape_;
};

}  // namespace ditgen
