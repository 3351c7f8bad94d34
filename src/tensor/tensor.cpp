#include "tensor/tensor.h"

#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/run_stage.h"
#include "util/strings.h"

namespace ditgen {

namespace {

std::string describe(const Tensor& t) {
  return std::string(device_name(t.device())) + " " + dtype_name(t.dtype()) +
         (t.layout() != Layout::kRowMajor ? " packed GEMM weight " : " tensor ") + shape_str(t.shape());
}

}  // namespace

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

Tensor Tensor::empty(Shape shape, Device device, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("Tensor::empty: negative dimension in " + shape_str(shape));
  if (device == Device::kCUDA && !is_floating(dtype))
    throw std::invalid_argument(std::string("Tensor::empty: CUDA tensors are float32, bfloat16 or float16, not ") +
                                dtype_name(dtype));
  Tensor t;
  t.shape_ = std::move(shape);
  t.device_ = device;
  t.dtype_ = dtype;
  t.allocate_storage();
  return t;
}

void Tensor::allocate_storage() {
  std::shared_ptr<void> storage;
  try {
    storage = device_memory::allocate(device_, nbytes());
  } catch (const std::bad_alloc&) {
    // Where every owned storage is born: name what could not be had, and when.
    throw RuntimeFailure("out of memory: cannot allocate a " + describe(*this) + " (" +
                         format_bytes(static_cast<double>(nbytes())) + ")" + during_stage());
  }
  data_ = storage.get();
  storage_ = std::move(storage);
}

Tensor Tensor::zeros(Shape shape, Device device, DType dtype) {
  Tensor t = empty(std::move(shape), device, dtype);
  device_memory::fill_zero(device, t.data_, t.nbytes());
  return t;
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t = empty(std::move(shape));
  float* p = t.data();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = value;
  return t;
}

Tensor Tensor::from_vector(Shape shape, const std::vector<float>& values) {
  Tensor t = empty(std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("Tensor::from_vector: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(t.shape_));
  if (!values.empty()) std::memcpy(t.data_, values.data(), t.nbytes());
  return t;
}

Tensor Tensor::borrow(void* data, DType dtype, Shape shape, std::shared_ptr<const void> owner) {
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) != 0)
    throw std::invalid_argument(std::string("Tensor::borrow: ") + dtype_name(dtype) + " storage at a misaligned address");
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.data_ = data;
  t.storage_ = std::move(owner);
  return t;
}

void Tensor::require_row_major(const char* what) const {
  if (layout_ != Layout::kRowMajor)
    throw std::logic_error(std::string(what) + " of a " + describe(*this) + " (only the CPU GEMM reads one)");
}

Tensor Tensor::packed(Shape shape, DType dtype, Layout layout, size_t bytes) {
  if (layout == Layout::kRowMajor) throw std::invalid_argument("Tensor::packed: a row-major layout");
  Tensor t = empty({static_cast<int64_t>(bytes)}, Device::kCPU, DType::kI8);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.layout_ = layout;
  t.packed_bytes_ = bytes;
  return t;
}

Tensor Tensor::block_quantized(const void* data, size_t bytes, uint32_t block_type, Shape shape, DType arithmetic,
                               std::shared_ptr<const void> owner) {
  if (arithmetic != DType::kF32 && arithmetic != DType::kBF16)
    throw std::invalid_argument(std::string("Tensor::block_quantized: a ") + dtype_name(arithmetic) +
                                " GEMM (float32 or bfloat16 dequantize a block weight)");
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = arithmetic;
  t.layout_ = Layout::kBlockQuantized;
  t.data_ = const_cast<void*>(data);
  t.storage_ = std::move(owner);
  t.packed_bytes_ = bytes;
  t.block_type_ = block_type;
  return t;
}

Tensor Tensor::with_arithmetic(DType arithmetic) const {
  if (layout_ != Layout::kBlockQuantized)
    throw std::logic_error("Tensor::with_arithmetic of a " + describe(*this) + " (block-quantized weights only)");
  Tensor t = block_quantized(data_, packed_bytes_, block_type_, shape_, arithmetic, storage_);
  t.device_ = device_;
  return t;
}

Tensor Tensor::blocks_to(Device device) const {
  if (layout_ != Layout::kBlockQuantized)
    throw std::logic_error("Tensor::blocks_to of a " + describe(*this) + " (block-quantized weights only)");
  if (device == device_) return *this;
  Tensor t = *this;
  t.device_ = device;
  t.allocate_storage();
  device_memory::copy_bytes(t.data_, device, data_, device_, packed_bytes_);
  return t;
}

Tensor Tensor::with_layout(Layout layout) const {
  Tensor t = *this;
  t.layout_ = layout;
  return t;
}

float* Tensor::data() {
  if (device_ != Device::kCPU || dtype_ != DType::kF32 || layout_ != Layout::kRowMajor)
    throw std::logic_error("host element access to a " + describe(*this) +
                           " (only CPU float32 tensors have data(); data_as<T>() reads the others, to() converts)");
  return static_cast<float*>(data_);
}

void* Tensor::checked_host(DType want) {
  if (device_ != Device::kCPU || dtype_ != want || layout_ != Layout::kRowMajor)
    throw std::logic_error("host access as " + std::string(dtype_name(want)) + " to a " + describe(*this));
  return data_;
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

void* Tensor::raw_at(int64_t offset) {
  require_row_major("Tensor::raw_at");
  if (offset < 0 || offset > numel())
    throw std::out_of_range("Tensor::raw_at: element " + std::to_string(offset) + " of a " + describe(*this));
  return static_cast<char*>(data_) + offset * static_cast<int64_t>(element_size());
}

const void* Tensor::raw_at(int64_t offset) const { return const_cast<Tensor*>(this)->raw_at(offset); }

Tensor Tensor::reshape(Shape shape) const {
  require_row_major("reshape");
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
  t.data_ = const_cast<void*>(raw_at(begin * row));
  return t;
}

Tensor Tensor::clone() const {
  require_row_major("clone");
  Tensor t = empty(shape_, device_, dtype_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device, DType dtype) const {
  if (device == device_ && dtype == dtype_) return *this;
  require_row_major("conversion");
  Tensor t = empty(shape_, device, dtype);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  require_row_major("Tensor::copy_from into");
  src.require_row_major("Tensor::copy_from");
  if (src.numel() != numel())
    throw std::invalid_argument("Tensor::copy_from: " + describe(src) + " into a " + describe(*this));
  if (numel() == 0) return;
  device_memory::copy(data_, device_, dtype_, src.data_, src.device_, src.dtype_, numel());
}

std::vector<float> Tensor::to_vector() const {
  require_row_major("to_vector");
  std::vector<float> v(static_cast<size_t>(numel()));
  if (!v.empty()) device_memory::copy(v.data(), Device::kCPU, DType::kF32, data_, device_, dtype_, numel());
  return v;
}

}  // namespace ditgen
