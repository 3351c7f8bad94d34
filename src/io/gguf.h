// GGUF reading (versions 2 and 3, little endian): the file mmapped once,
// every header field, metadata key/value, tensor info, offset and size
// checked against the file before a tensor byte is read, so a hostile or
// truncated file fails with ModelError naming the file and the key or
// tensor at fault, never a crash or an overread (fuzz/fuzz_gguf.cpp).
//
// Format (ggml's docs/gguf.md; gguf-py's reader and writer): "GGUF", u32
// version, u64 tensor count, u64 key/value count; the key/values (u64-length
// string key, u32 value type, value; an array is a u32 element type, a u64
// count and the elements, which may be arrays again); the tensor infos
// (name, u32 dimension count, u64 dimensions fastest first as ggml orders
// them, u32 ggml type, u64 offset into the data section); padding to the
// alignment (general.alignment, a u32 power of two, default 32); the data
// section. A tensor's bytes are whole blocks of its type
// (kernels/math/ggml_blocks.h): its first dimension is a whole number of
// blocks, its offset a multiple of the alignment, and no two tensors overlap.
//
// Shapes are given row-major, as PyTorch and safetensors have them: ggml's
// dimensions reversed, or, where ComfyUI-GGUF's convert.py quantized a
// tensor as rows of 256 and kept its real shape in the metadata key
// "comfy.gguf.orig_shape.<tensor name>" (an array of integers), that shape.
// Tensors of any dimension count up to 8 are read (ComfyUI-GGUF's Wan files
// hold the 5-D patch embedding that ggml's own reader, at most 4-D, refuses).
//
// Loading (io/weight_file.h): F32, F16, BF16 (and ggml's I32, I64) tensors
// load in their own dtype, borrowed from the map (zero copy); the 10 block
// types ditgen reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K) are
// dequantized into float32, bit-identical to gguf-py. The other ggml types
// (IQ*, Q8_1, ...) open, their sizes checked, but do not load.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/weight_file.h"

namespace ditgen::io {

class FileMap;

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);  // "UINT32", "ARRAY", ... (gguf-py's names)

// One metadata value: a number, a bool, a string or an array whose elements
// all have element_type (arrays of arrays included).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;     // kU8, kU16, kU32, kU64, kBool (0 / 1)
  int64_t i = 0;      // kI8, kI16, kI32, kI64
  double f = 0;       // kF32 (widened exactly), kF64
  std::string s;      // kString
  GgufValueType element_type = GgufValueType::kU8;  // kArray
  std::vector<GgufValue> items;                     // kArray

  static GgufValue unsigned_of(GgufValueType t, uint64_t v);  // kU8 / kU16 / kU32 / kU64 / kBool
  static GgufValue signed_of(GgufValueType t, int64_t v);     // kI8 / kI16 / kI32 / kI64
  static GgufValue float_of(GgufValueType t, double v);       // kF32 / kF64
  static GgufValue string_of(std::string v);
  static GgufValue array_of(GgufValueType element_type, std::vector<GgufValue> items);

  // The value as an integer, for any integer type; false otherwise (or an
  // unsigned value above INT64_MAX).
  bool integer(int64_t& out) const;
};

// A tensor as the file describes it.
struct GgufTensor {
  std::string name;
  math::GgmlType type = math::GgmlType::kF32;
  std::vector<uint64_t> ne;  // ggml's dimensions, fastest first, as stored
  Shape shape;               // row-major: comfy.gguf.orig_shape, else ne reversed
  uint64_t offset = 0;       // into the data section
  uint64_t nbytes = 0;
};

class GgufFile final : public WeightFile {
 public:
  // Maps and validates; ModelError("<path>: ...") on any problem.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  ~GgufFile() override;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // The key/value pairs in file order; find() one by key (null if absent).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  // general.architecture ("wan"), absent in files stable-diffusion.cpp wrote.
  std::optional<std::string> architecture() const;

  const GgufTensor& tensor(const std::string& name) const;  // ModelError if absent
  const std::vector<GgufTensor>& tensors() const { return tensors_; }  // in file order
  // The tensor's bytes in the map (nbytes of them): quantized compute reads
  // its blocks in place.
  const uint8_t* data(const std::string& name) const;
  const uint8_t* bytes(const std::string& name) const override { return data(name); }

  // WeightFile.
  const std::string& path() const override { return path_; }
  bool contains(const std::string& name) const override { return index_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  Tensor load(const std::string& name) const override;
  Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const override;
  Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const override;
  void release_pages(const std::string& name) const override;
  void release_pages(const std::string& name, const Tensor& view) const override;

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

 private:
  GgufFile() = default;
  size_t index_of(const std::string& name) const;  // ModelError if absent
  // Elements [first, first + count) of tensor `i` as `out_shape`.
  Tensor load_elements(size_t i, int64_t first, int64_t count, const Shape& out_shape) const;

  std::string path_;
  std::unique_ptr<FileMap> map_;
  const uint8_t* data_section_ = nullptr;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensor> tensors_;
  std::vector<TensorInfo> infos_;  // parallel to tensors_
  std::map<std::string, size_t> index_;
  std::weak_ptr<const GgufFile> self_;  // lets borrowed tensors keep the map alive
};

}  // namespace ditgen::io
