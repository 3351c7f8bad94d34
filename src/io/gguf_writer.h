// GGUF writing (version 3, little endian), laid out byte for byte as
// gguf-py's GGUFWriter lays it out: general.architecture first, then the
// key/values in the order added, the tensor infos (dimensions reversed into
// ggml's order, offsets advancing by each tensor's size padded to the
// alignment), padding to the alignment, and each tensor's bytes followed by
// padding to the alignment (the last one too). A file written from the same
// keys and tensors as a gguf-py script is the same file
// (tests/io/test_gguf_writer.cpp compares with one gguf-py wrote).
//
// The file is written through util/atomic_file.h: a temporary name, renamed
// onto the path when complete, so a failure (or an interrupt) leaves
// nothing half-written. Tensor bytes are produced when the file is written,
// one tensor at a time (a converter never holds a whole quantized model).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/ggml_quants.h"
#include "io/gguf.h"

namespace ditgen::io {

class GgufWriter {
 public:
  // Fills `bytes` bytes at `out` with a tensor's data in its ggml type.
  using Fill = std::function<void(uint8_t* out, uint64_t bytes)>;
  // Called before each tensor's data is produced (a progress line).
  using Progress = std::function<void(size_t index, size_t count, const std::string& name)>;

  // general.architecture, first, as gguf-py writes it; "" writes none (as
  // stable-diffusion.cpp's files have none: readers go by the names).
  explicit GgufWriter(const std::string& architecture);

  // general.alignment (a power of two; default 32, then not written).
  void set_alignment(uint32_t alignment);
  // A key/value (std::invalid_argument for a key added twice or an array
  // whose items are not all of its element type).
  void add(const std::string& key, GgufValue value);

  // A tensor of `type` with the row-major `shape`; its last dimension must
  // be a whole number of the type's blocks (std::invalid_argument
  // otherwise, or for a name added twice).
  void add_tensor(const std::string& name, GgmlType type, const Shape& shape, Fill fill);
  void add_tensor(const std::string& name, GgmlType type, const Shape& shape, std::vector<uint8_t> bytes);
  // ComfyUI-GGUF's form of a tensor whose last dimension is no whole number
  // of blocks: stored as `stored_shape` (whole blocks per row, the same
  // element count), its real shape recorded as the metadata key
  // "comfy.gguf.orig_shape.<name>" (an ARRAY of INT32), which the reader
  // (io/gguf.h) and ComfyUI-GGUF restore.
  void add_reshaped_tensor(const std::string& name, GgmlType type, const Shape& shape, const Shape& stored_shape,
                           Fill fill);

  // The shape ComfyUI-GGUF's convert.py stores a tensor of `shape` in for a
  // block type: rows of 256 when the last dimension is no whole number of
  // blocks but the element count is a whole number of 256 (and of blocks);
  // false when neither form holds it (the caller keeps it in a float type).
  static bool stored_shape_for(GgmlType type, const Shape& shape, Shape& stored);

  // Writes the file (RuntimeFailure on an I/O error; an exception from a
  // Fill propagates); nothing is left at `path` unless all of it was written.
  void write(const std::string& path, const Progress& progress = {}) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    Shape shape;  // as stored
    uint64_t nbytes;
    Fill fill;
  };
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace ditgen::io
