#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "util/error.h"

namespace ditgen {

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor Tensor::empty(Shape shape) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("Tensor::empty: negative dimension in " + shape_str(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  size_t bytes = t.nbytes();
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw RuntimeFailure("out of memory allocating " + std::to_string(bytes) + " bytes for a tensor " +
                               shape_str(t.shape_));
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = static_cast<float*>(p);
  return t;
}

Tensor Tensor::zeros(Shape shape) {
  Tensor t = empty(std::move(shape));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t = empty(std::move(shape));
  for (int64_t i = 0, n = t.numel(); i < n; ++i) t.data_[i] = value;
  return t;
}

Tensor Tensor::from_vector(Shape shape, const std::vector<float>& values) {
  Tensor t = empty(std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("Tensor::from_vector: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(t.shape_));
  std::memcpy(t.data_, values.data(), t.nbytes());
  return t;
}

Tensor Tensor::borrow(float* data, Shape shape, std::shared_ptr<const void> owner) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("reshape: two -1 dimensions");
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0) shape[infer] = numel() / known;
  if (shape_numel(shape) != numel())
    throw std::invalid_argument("reshape: " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  if (ndim() == 0 || begin < 0 || end < begin || end > shape_[0])
    throw std::invalid_argument("slice0: [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                                shape_str(shape_));
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = data_ + begin * row;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_);
  if (numel()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

}  // namespace ditgen
