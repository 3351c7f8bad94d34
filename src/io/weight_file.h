// One file of model weights as the loaders see it, whatever its format:
// the safetensors reader (io/safetensors.h) and the GGUF reader (io/gguf.h)
// both implement WeightFile, so a WeightStore (io/safetensors.h) holds
// either, and the model loaders ask for tensors by name without knowing the
// format.
//
// load() hands out a tensor in the file's own dtype when it has a tensor
// DType (float32, bfloat16, float16, int32, int64), borrowed from the map
// (zero copy) when aligned; the formats without one are decoded to float32
// once, at load: float8 (e4m3fn, e5m2) and ggml's block-quantized types.
// load_f32 is load() widened to float32 where it is not already.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/math/ggml_blocks.h"
#include "tensor/tensor.h"

namespace ditgen::io {

// Every element type of the safetensors format (the file's "dtype" tags): a
// file holding any of them opens; the five with a tensor DType load as they
// are, the two float8 types decode to float32.
enum class StoredType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2, kU64, kU32, kU16 };
const char* stored_type_name(StoredType t);  // the file's tag: "F32", "BF16", ...
size_t stored_type_size(StoredType t);
// The tensor dtype holding `t`'s values as stored: F32, BF16, F16, I32, I64
// map to their DType; the rest have none (false).
bool tensor_dtype(StoredType t, DType& out);

struct TensorInfo {
  std::string name;
  // safetensors: the stored type. GGUF: the type load() hands out: F32, F16
  // or BF16 as stored, F32 for the block-quantized types (ggml_type says which).
  StoredType type;
  Shape shape;         // row-major, as PyTorch has it
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  std::optional<math::GgmlType> ggml_type;  // set for a tensor of a GGUF file
};

// The file's own name of the tensor's element type, for messages: "BF16",
// "F8_E4M3", "Q4_K".
std::string element_type_name(const TensorInfo& info);

class WeightFile {
 public:
  virtual ~WeightFile() = default;

  virtual const std::string& path() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual const TensorInfo& info(const std::string& name) const = 0;  // ModelError if absent
  virtual std::vector<std::string> names() const = 0;                 // sorted

  // The whole tensor (see above); ModelError naming the file and tensor for
  // a type that neither loads nor decodes (e.g. a GGUF IQ2_XS tensor).
  virtual Tensor load(const std::string& name) const = 0;
  // Rows [row_begin, row_end) of the leading dimension, reading only those
  // bytes (tensor parallelism loads its own slices).
  virtual Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const = 0;
  // Columns [col_begin, col_end) of a 2-D tensor, copied into owned storage
  // (tensor parallelism's row-split layers); the file pages read are
  // released from this process afterwards.
  virtual Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const = 0;
  // Drops the file pages holding `name` from this process (madvise
  // MADV_DONTNEED on the read-only map). A tensor still borrowing those
  // bytes stays valid: the pages fault back in from the file when read.
  virtual void release_pages(const std::string& name) const = 0;
  // The same for the bytes of `view`, a view of part of `name` (load or
  // load_rows); std::invalid_argument if it does not lie inside them.
  virtual void release_pages(const std::string& name, const Tensor& view) const = 0;

  // The tensor's bytes in the file's read-only map (info(name).end -
  // info(name).begin of them): what load() borrows when it does not decode.
  virtual const uint8_t* bytes(const std::string& name) const = 0;

  // load / load_rows in float32 (the stored values widened exactly).
  Tensor load_f32(const std::string& name) const;
  Tensor load_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end) const;
};

}  // namespace ditgen::io
