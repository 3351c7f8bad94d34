// safetensors reading (mmap, fully validated header) and writing.
// A file is mapped read-only once; tensors load in their stored dtype
// (F32, BF16, F16, I32, I64), borrowed in place (zero copy) when aligned for
// their element type, copied only when not: a bfloat16 checkpoint stays
// bfloat16 in memory, never widened here (conversion is the consumer's, once).
// Every offset, size, dtype and shape in the header is checked against the
// file size before anything is read, so hostile files fail with ModelError
// naming the file and tensor, never a crash or an overread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::io {

// Every element type of the safetensors format (the file's "dtype" tags): a
// file holding any of them opens; only the five with a tensor DType load.
enum class StoredType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2, kU64, kU32, kU16 };
const char* stored_type_name(StoredType t);  // the file's tag: "F32", "BF16", ...
size_t stored_type_size(StoredType t);
// The tensor dtype holding `t`'s values as stored: F32, BF16, F16, I32, I64
// map to their DType; the rest have none (false).
bool tensor_dtype(StoredType t, DType& out);

struct TensorInfo {
  std::string name;
  StoredType type;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates; throws ModelError("<path>: ...") on any problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // ModelError if absent
  std::vector<std::string> names() const;                 // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The whole tensor in its stored dtype, borrowed in place when the data is
  // aligned for its element type (else copied into owned storage). Other
  // stored types: ModelError naming the tensor and its dtype.
  Tensor load(const std::string& name) const;
  // Rows [row_begin, row_end) of the leading dimension, reading only those
  // bytes (tensor parallelism loads its own slices).
  Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  // Columns [col_begin, col_end) of a 2-D tensor, copied into owned storage
  // in the stored dtype (tensor parallelism's row-split layers). The file pages it read are
  // released from this process afterwards, so its resident memory holds only
  // the slice.
  Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const;
  // Drops the file pages holding `name` from this process (madvise
  // MADV_DONTNEED on the read-only map): after a weight was converted or
  // uploaded, its source stops counting in this process's resident memory.
  // A tensor still borrowing those bytes stays valid: the pages fault back
  // in from the file when read.
  void release_pages(const std::string& name) const;
  // The same for the bytes of `view`, a view of part of `name` (load or
  // load_rows); std::invalid_argument if it does not lie inside them.
  void release_pages(const std::string& name, const Tensor& view) const;

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

 private:
  SafetensorsFile() = default;
  // Rows [row_begin, row_end) of `ti` (a scalar counts as one row).
  Tensor load_rows_of(const TensorInfo& ti, int64_t row_begin, int64_t row_end, const Shape& out_shape) const;
  void release_pages_of(const TensorInfo& ti) const;
  void release_bytes(const uint8_t* begin, size_t bytes) const;
  std::string path_;
  const uint8_t* map_ = nullptr;  // whole file
  size_t map_size_ = 0;
  int mapping_slot_ = -1;  // util/mapped_files.h: names this file in a SIGBUS report
  size_t data_offset_ = 0;        // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::weak_ptr<const SafetensorsFile> self_;  // lets borrowed tensors keep the map alive
};

// Writes CPU tensors, each in its own dtype, to `path` atomically (temporary
// name, then rename).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The weights of one model part directory (e.g. <model>/transformer):
// a single `*.safetensors` file, or shards listed by `*.safetensors.index.json`
// (its weight_map validated: every shard exists and holds the tensors named).
// Variant names as transformers and diffusers save them are found too:
// `model.fp16.safetensors`, or `model.safetensors.index.fp16.json` listing
// `model.fp16-00001-of-00002.safetensors` ...; a directory holding several
// candidates takes diffusion_pytorch_model / model without a variant, and
// is ambiguous (ModelError listing them) otherwise.
class WeightStore {
 public:
  static WeightStore open_dir(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // ModelError if absent
  const std::string& file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  Tensor load(const std::string& name) const;
  Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const;
  void release_pages(const std::string& name) const;  // SafetensorsFile::release_pages
  void release_pages(const std::string& name, const Tensor& view) const;

  // Checks that `name` exists with exactly `shape` and a floating dtype
  // (ModelError naming the file, the tensor, and expected vs found shape or
  // dtype otherwise).
  void expect(const std::string& name, const Shape& shape) const;

 private:
  size_t where_index(const std::string& name) const;  // ModelError if absent

  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
  std::string source_;                   // the single weights file or the index, for messages
};

}  // namespace ditgen::io
