// GgufWriter: the header and tensor infos serialised into one buffer (their
// size is small), then the tensors streamed through write_file_atomic, each
// produced into a scratch buffer by its Fill and padded.
#include "io/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "io/ggml_quants.h"
#include "util/atomic_file.h"

namespace ditgen::io {
namespace {

class Bytes {
 public:
  std::string out;
  void uint(uint64_t v, int size) {
    for (int k = 0; k < size; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  void str(const std::string& s) {
    uint(s.size(), 8);
    out += s;
  }
  template <class T>
  void bits(T v) {
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    uint(u, sizeof v);
  }
  // A value without its type tag (gguf-py's _pack_val with add_vtype=False).
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufValueType::kU8: case GgufValueType::kBool: uint(v.u, 1); break;
      case GgufValueType::kU16: uint(v.u, 2); break;
      case GgufValueType::kU32: uint(v.u, 4); break;
      case GgufValueType::kU64: uint(v.u, 8); break;
      case GgufValueType::kI8: uint(static_cast<uint64_t>(v.i), 1); break;
      case GgufValueType::kI16: uint(static_cast<uint64_t>(v.i), 2); break;
      case GgufValueType::kI32: uint(static_cast<uint64_t>(v.i), 4); break;
      case GgufValueType::kI64: uint(static_cast<uint64_t>(v.i), 8); break;
      case GgufValueType::kF32: bits(static_cast<float>(v.f)); break;
      case GgufValueType::kF64: bits(v.f); break;
      case GgufValueType::kString: str(v.s); break;
      case GgufValueType::kArray:
        uint(static_cast<uint32_t>(v.element_type), 4);
        uint(v.items.size(), 8);
        for (const GgufValue& item : v.items) value(item);
        break;
    }
  }
};

uint64_t padded(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Every array's items have its element type, all the way down.
bool well_typed(const GgufValue& v) {
  if (v.type != GgufValueType::kArray) return true;
  return std::all_of(v.items.begin(), v.items.end(),
                     [&](const GgufValue& item) { return item.type == v.element_type && well_typed(item); });
}

}  // namespace

GgufWriter::GgufWriter(const std::string& architecture) {
  if (!architecture.empty()) add("general.architecture", GgufValue::string_of(architecture));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  alignment_ = alignment;
  add("general.alignment", GgufValue::unsigned_of(GgufValueType::kU32, alignment));
}

void GgufWriter::add(const std::string& key, GgufValue value) {
  for (const auto& [k, v] : metadata_)
    if (k == key) throw std::invalid_argument("GgufWriter: metadata key '" + key + "' added twice");
  if (!well_typed(value))
    throw std::invalid_argument("GgufWriter: metadata key '" + key + "': an array item is not of its element type");
  metadata_.emplace_back(key, std::move(value));
}

// The byte size of a tensor of `type` and `shape` (std::invalid_argument
// when its rows are no whole number of blocks).
static uint64_t tensor_bytes(const std::string& name, GgmlType type, const Shape& shape) {
  const int64_t row = shape.empty() ? 1 : shape.back();
  uint64_t nbytes = 0;
  if (row < 0 || !whole_blocks(type, row) || !ggml_bytes(type, static_cast<uint64_t>(shape_numel(shape)), nbytes))
    throw std::invalid_argument("GgufWriter: tensor '" + name + "' of shape " + shape_str(shape) +
                                ": rows are not a whole number of " + math::ggml_traits(type).name + " blocks");
  return nbytes;
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const Shape& shape, Fill fill) {
  for (const PendingTensor& t : tensors_)
    if (t.name == name) throw std::invalid_argument("GgufWriter: tensor '" + name + "' added twice");
  tensors_.push_back({name, type, shape, tensor_bytes(name, type, shape), std::move(fill)});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const Shape& shape, std::vector<uint8_t> bytes) {
  if (const uint64_t need = tensor_bytes(name, type, shape); need != bytes.size())
    throw std::invalid_argument("GgufWriter: tensor '" + name + "' needs " + std::to_string(need) + " bytes, given " +
                                std::to_string(bytes.size()));
  auto data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  add_tensor(name, type, shape, [data](uint8_t* out, uint64_t n) { std::memcpy(out, data->data(), n); });
}

void GgufWriter::add_reshaped_tensor(const std::string& name, GgmlType type, const Shape& shape,
                                     const Shape& stored_shape, Fill fill) {
  if (shape_numel(shape) != shape_numel(stored_shape))
    throw std::invalid_argument("GgufWriter: tensor '" + name + "': shape " + shape_str(shape) + " stored as " +
                                shape_str(stored_shape) + " changes the element count");
  std::vector<GgufValue> dims;
  for (int64_t d : shape) {
    if (d > INT32_MAX) throw std::invalid_argument("GgufWriter: tensor '" + name + "': a dimension beyond INT32");
    dims.push_back(GgufValue::signed_of(GgufValueType::kI32, d));
  }
  // The key first, as ComfyUI-GGUF's convert.py adds it.
  add("comfy.gguf.orig_shape." + name, GgufValue::array_of(GgufValueType::kI32, std::move(dims)));
  try {
    add_tensor(name, type, stored_shape, std::move(fill));
  } catch (...) {
    metadata_.pop_back();
    throw;
  }
}

bool GgufWriter::stored_shape_for(GgmlType type, const Shape& shape, Shape& stored) {
  const int64_t row = shape.empty() ? 1 : shape.back(), numel = shape_numel(shape);
  if (whole_blocks(type, row)) {
    stored = shape;
    return true;
  }
  if (numel > 0 && numel % 256 == 0 && whole_blocks(type, 256)) {
    stored = {numel / 256, 256};
    return true;
  }
  return false;
}

void GgufWriter::write(const std::string& path, const Progress& progress) const {
  Bytes head;
  head.out = "GGUF";
  head.uint(3, 4);
  head.uint(tensors_.size(), 8);
  head.uint(metadata_.size(), 8);
  for (const auto& [key, value] : metadata_) {
    head.str(key);
    head.uint(static_cast<uint32_t>(value.type), 4);
    head.value(value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    head.str(t.name);
    head.uint(t.shape.size(), 4);
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) head.uint(static_cast<uint64_t>(*it), 8);
    head.uint(static_cast<uint32_t>(t.type), 4);
    head.uint(offset, 8);
    offset += padded(t.nbytes, alignment_);
  }
  head.out.append(padded(head.out.size(), alignment_) - head.out.size(), '\0');

  write_file_atomic(path, [&](std::FILE* f) {
    std::fwrite(head.out.data(), 1, head.out.size(), f);
    std::vector<uint8_t> buffer;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const PendingTensor& t = tensors_[k];
      if (progress) progress(k, tensors_.size(), t.name);
      buffer.assign(padded(t.nbytes, alignment_), 0);
      t.fill(buffer.data(), t.nbytes);
      std::fwrite(buffer.data(), 1, buffer.size(), f);
    }
  });
}

}  // namespace ditgen::io
