// Tensor: a contiguous, row-major array with a shape, a device and an element
// type, sharing its storage by reference count. Storage is owned (64-byte
// aligned heap on the CPU, the caching allocator's memory on CUDA) or
// borrowed from something kept alive by the same handle (an mmapped
// safetensors file: weights are used in place in their stored dtype, never
// copied or widened). Views (reshape, leading-dimension slices) share
// storage; ops allocate their outputs.
//
// CPU tensors hold float32, bfloat16, float16, int32 or int64; CUDA tensors
// float32, bfloat16 or float16 (src/vocab/dtype.h). The CPU ops compute in
// float32, so host code mostly reads elements through data(), which exists
// for CPU float32 tensors only; data_as<T>() reads the other dtypes (T =
// BFloat16, Float16, int32_t, int64_t, float; checked against the dtype).
// A CUDA tensor reached by CPU code is a clear error, never a bad pointer.
//
// Three kinds of tensor are not row-major, all CPU GEMM weights: a
// bfloat16 weight packed into oneDNN's blocked layout (Layout::kGemmPacked,
// made only by ops::pack_gemm_weight), an int8 W8A8 weight
// (Layout::kInt8Packed, made only by ops::quantize_gemm_weight: its values
// in oneDNN's int8 layout, then its per-row scales,
// ops/cpu/int8_matmul.h), and a weight in one of ggml's block formats as a
// GGUF file stores it (Layout::kBlockQuantized, borrowed from the mapped
// file: each row K / block_size blocks of block_type(), a ggml type number,
// kernels/math/ggml_blocks.h; its dtype is the arithmetic of the GEMM that
// dequantizes it band by band, float32 or bfloat16). Each keeps its logical
// (N, K) shape, and only the CPU GEMM reads it: element access, views and
// conversions of it are std::logic_error; nbytes() is its storage's size.
// A block-quantized weight may also lie on CUDA (blocks_to), where only
// ops::dequantize_gemm_weight reads it.
// Conversion is explicit: to(dtype) / copy_from (ops::convert in the op
// front end). Everything device-agnostic goes through raw() and the ops.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "vocab/dtype.h"
#include "tensor/half.h"

namespace ditgen {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 4, 32, 32]"
int64_t shape_numel(const Shape& s);

// How a tensor's elements are laid out in its storage (see above).
enum class Layout { kRowMajor, kGemmPacked, kInt8Packed, kBlockQuantized };

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised / zero-filled owned storage. A CUDA tensor needs a build
  // with the CUDA backend and a bound device (RuntimeFailure otherwise) and
  // a floating dtype (std::invalid_argument otherwise); a CPU tensor may have
  // any dtype.
  static Tensor empty(Shape shape, Device device = Device::kCPU, DType dtype = DType::kF32);
  static Tensor zeros(Shape shape, Device device = Device::kCPU, DType dtype = DType::kF32);
  // CPU float32 constructors.
  static Tensor full(Shape shape, float value);
  static Tensor from_vector(Shape shape, const std::vector<float>& values);
  // Borrowed CPU storage of `dtype` elements: `owner` keeps `data` alive (e.g.
  // an mmapped file). `data` must be aligned for the dtype (checked).
  static Tensor borrow(void* data, DType dtype, Shape shape, std::shared_ptr<const void> owner);

  bool defined() const { return data_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + ndim() : i); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return packed_bytes_ ? packed_bytes_ : static_cast<size_t>(numel()) * element_size(); }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  bool is_cpu() const { return device_ == Device::kCPU; }

  // Host float32 elements: CPU float32 tensors only (std::logic_error
  // naming the tensor's device and dtype otherwise).
  float* data();
  const float* data() const;
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }
  // Host elements as T, for any CPU dtype: T must be the dtype's element type
  // (float, BFloat16, Float16, int32_t, int64_t; std::logic_error naming the
  // tensor otherwise, as data()).
  template <class T> T* data_as() { return static_cast<T*>(checked_host(element_dtype<T>())); }
  template <class T> const T* data_as() const {
    return static_cast<const T*>(const_cast<Tensor*>(this)->checked_host(element_dtype<T>()));
  }

  // The storage, whatever the device and dtype (for the op implementations).
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // Address of element `offset` (0 <= offset <= numel(), checked).
  void* raw_at(int64_t offset);
  const void* raw_at(int64_t offset) const;

  // Same storage, new shape (numel must match; one dim may be -1).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Deep copy into fresh owned storage on the same device, same dtype.
  Tensor clone() const;
  // This tensor on `device` as `dtype`: itself (shared) when both already
  // match, else a converted copy (float32 <-> bfloat16 / float16 rounds to
  // nearest even, as torch does; integers <-> floats are exact casts, a value
  // that does not fit exactly is std::invalid_argument). Host <-> device
  // copies are blocking.
  Tensor to(Device device, DType dtype) const;
  Tensor to(Device device) const { return to(device, device == device_ ? dtype_ : DType::kF32); }
  Tensor to(DType dtype) const { return to(device_, dtype); }
  // The same storage and shape, tagged as laid out by `layout` (for the
  // one function that packs a weight: its bytes must already be so).
  Tensor with_layout(Layout layout) const;
  // Owned CPU storage of `bytes` for a weight of logical `shape` laid out
  // by `layout` (not row-major), for the function that fills it.
  static Tensor packed(Shape shape, DType dtype, Layout layout, size_t bytes);
  // A (N, K) weight of ggml block type `block_type` over `bytes` of
  // borrowed CPU storage (`owner` keeps it alive), computed in `arithmetic`.
  static Tensor block_quantized(const void* data, size_t bytes, uint32_t block_type, Shape shape, DType arithmetic,
                                std::shared_ptr<const void> owner);
  // kBlockQuantized: the ggml type number of its blocks (0 otherwise).
  uint32_t block_type() const { return block_type_; }
  // The same weight computed in `arithmetic` (kBlockQuantized only: its
  // bytes are not the dtype's).
  Tensor with_arithmetic(DType arithmetic) const;
  // The same block-quantized weight with its blocks (the stored bytes,
  // unconverted) on `device`: itself when already there, else a copy
  // (blocking). On CUDA it is only ops::dequantize_gemm_weight's input.
  Tensor blocks_to(Device device) const;
  // Overwrites this tensor's elements with src's (same numel; any devices
  // and dtypes; converted as to()).
  void copy_from(const Tensor& src);
  // Host float32 copy of the elements, from any device.
  std::vector<float> to_vector() const;

 private:
  template <class T> static constexpr DType element_dtype() {
    if constexpr (std::is_same_v<T, float>) return DType::kF32;
    else if constexpr (std::is_same_v<T, BFloat16>) return DType::kBF16;
    else if constexpr (std::is_same_v<T, Float16>) return DType::kF16;
    else if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
    else if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
    else static_assert(sizeof(T) == 0, "data_as<T>: T is not a tensor element type");
  }
  // data_ when this is a CPU tensor of `want` (std::logic_error otherwise).
  void* checked_host(DType want);
  // Fresh owned storage of nbytes() on device_ (out of memory: a
  // RuntimeFailure naming the tensor and the stage).
  void allocate_storage();
  // std::logic_error naming `what` unless this tensor is row-major.
  void require_row_major(const char* what) const;

  std::shared_ptr<const void> storage_;  // keeps data_ alive
  void* data_ = nullptr;                 // the storage address (host or device)
  Shape shape_;
  Device device_ = Device::kCPU;
  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kRowMajor;
  size_t packed_bytes_ = 0;  // a packed layout's storage size when it is not numel x element size (0: it is)
  uint32_t block_type_ = 0;  // kBlockQuantized: the ggml type of its blocks
};

}  // namespace ditgen
