// GGUF reader: a bounds-checked cursor over the mapped header (every read
// first checks the bytes left), the metadata values read recursively with a
// depth and a total-count limit, then the tensor infos checked against the
// data section; loading borrows or dequantizes (io/ggml_quants.h).
#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/file_map.h"
#include "io/ggml_quants.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 8;
constexpr int kMaxNesting = 8;                 // arrays inside arrays
constexpr uint64_t kMaxValues = uint64_t{1} << 22;  // metadata values in all (a tokenizer's vocabulary: < 1M)
const std::string kOrigShapePrefix = "comfy.gguf.orig_shape.";

struct ValueTypeEntry {
  GgufValueType type;
  const char* name;
  uint64_t min_bytes;  // the smallest encoding of one value
};
constexpr ValueTypeEntry kValueTypes[] = {
    {GgufValueType::kU8, "UINT8", 1},     {GgufValueType::kI8, "INT8", 1},
    {GgufValueType::kU16, "UINT16", 2},   {GgufValueType::kI16, "INT16", 2},
    {GgufValueType::kU32, "UINT32", 4},   {GgufValueType::kI32, "INT32", 4},
    {GgufValueType::kF32, "FLOAT32", 4},  {GgufValueType::kBool, "BOOL", 1},
    {GgufValueType::kString, "STRING", 8}, {GgufValueType::kArray, "ARRAY", 12},
    {GgufValueType::kU64, "UINT64", 8},   {GgufValueType::kI64, "INT64", 8},
    {GgufValueType::kF64, "FLOAT64", 8},
};

const ValueTypeEntry* find_value_type(uint32_t raw) {
  for (const ValueTypeEntry& e : kValueTypes)
    if (static_cast<uint32_t>(e.type) == raw) return &e;
  return nullptr;
}

// Reads little-endian fields of the mapped header, each checked against the
// bytes left; `what` names the field in the ModelError.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size) : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what, const std::string& problem) const {
    throw ModelError(path_ + ": " + what + ": " + problem);
  }
  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left())
      fail(what, "needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) + ", but the file ends " +
                     std::to_string(left()) + " bytes later (truncated?)");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint64_t uint(int bytes, const std::string& what) {
    const uint8_t* p = take(static_cast<uint64_t>(bytes), what);
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
    return v;
  }
  uint32_t u32(const std::string& what) { return static_cast<uint32_t>(uint(4, what)); }
  uint64_t u64(const std::string& what) { return uint(8, what); }
  std::string string(const std::string& what) {
    const uint64_t n = u64(what);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

template <class T>
T sign_extend(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);  // little-endian host: the low bytes
  return v;
}

GgufValue read_value(Cursor& in, uint32_t raw_type, const std::string& what, int depth, uint64_t& values) {
  const ValueTypeEntry* entry = find_value_type(raw_type);
  if (!entry) in.fail(what, "unknown value type " + std::to_string(raw_type));
  if (++values > kMaxValues) in.fail(what, "more than " + std::to_string(kMaxValues) + " metadata values");
  GgufValue v;
  v.type = entry->type;
  switch (v.type) {
    case GgufValueType::kU8: v.u = in.uint(1, what); break;
    case GgufValueType::kU16: v.u = in.uint(2, what); break;
    case GgufValueType::kU32: v.u = in.uint(4, what); break;
    case GgufValueType::kU64: v.u = in.uint(8, what); break;
    case GgufValueType::kBool: v.u = in.uint(1, what) != 0; break;
    case GgufValueType::kI8: v.i = sign_extend<int8_t>(in.uint(1, what)); break;
    case GgufValueType::kI16: v.i = sign_extend<int16_t>(in.uint(2, what)); break;
    case GgufValueType::kI32: v.i = sign_extend<int32_t>(in.uint(4, what)); break;
    case GgufValueType::kI64: v.i = sign_extend<int64_t>(in.uint(8, what)); break;
    case GgufValueType::kF32: v.f = sign_extend<float>(in.uint(4, what)); break;
    case GgufValueType::kF64: v.f = sign_extend<double>(in.uint(8, what)); break;
    case GgufValueType::kString: v.s = in.string(what); break;
    case GgufValueType::kArray: {
      const uint32_t raw_element = in.u32(what);
      const ValueTypeEntry* element = find_value_type(raw_element);
      if (!element) in.fail(what, "array of unknown value type " + std::to_string(raw_element));
      const uint64_t count = in.u64(what);
      if (count > in.left() / element->min_bytes)
        in.fail(what, "an array of " + std::to_string(count) + " " + element->name + " values cannot fit in the " +
                          std::to_string(in.left()) + " bytes left");
      if (element->type == GgufValueType::kArray && depth + 1 >= kMaxNesting)
        in.fail(what, "arrays nested more than " + std::to_string(kMaxNesting) + " deep");
      v.element_type = element->type;
      v.items.reserve(count);
      for (uint64_t k = 0; k < count; ++k) v.items.push_back(read_value(in, raw_element, what, depth + 1, values));
      break;
    }
  }
  return v;
}

// The StoredType of what load() hands out for a ggml type (io/weight_file.h).
StoredType loaded_type(math::GgmlType t) {
  switch (t) {
    case math::GgmlType::kF16: return StoredType::kF16;
    case math::GgmlType::kBF16: return StoredType::kBF16;
    case math::GgmlType::kI8: return StoredType::kI8;
    case math::GgmlType::kI16: return StoredType::kI16;
    case math::GgmlType::kI32: return StoredType::kI32;
    case math::GgmlType::kI64: return StoredType::kI64;
    case math::GgmlType::kF64: return StoredType::kF64;
    default: return StoredType::kF32;  // F32, and the block types dequantize to it
  }
}

bool is_block_type(math::GgmlType t) { return math::ggml_traits(t).block_size > 1; }

std::string tensor_where(const std::string& name) { return "tensor '" + name + "'"; }

}  // namespace

// ---------------------------------------------------------------- values

const char* gguf_value_type_name(GgufValueType t) {
  const ValueTypeEntry* e = find_value_type(static_cast<uint32_t>(t));
  return e ? e->name : "?";
}

GgufValue GgufValue::unsigned_of(GgufValueType t, uint64_t v) {
  GgufValue out;
  out.type = t;
  out.u = v;
  return out;
}

GgufValue GgufValue::signed_of(GgufValueType t, int64_t v) {
  GgufValue out;
  out.type = t;
  out.i = v;
  return out;
}

GgufValue GgufValue::float_of(GgufValueType t, double v) {
  GgufValue out;
  out.type = t;
  out.f = v;
  return out;
}

GgufValue GgufValue::string_of(std::string v) {
  GgufValue out;
  out.type = GgufValueType::kString;
  out.s = std::move(v);
  return out;
}

GgufValue GgufValue::array_of(GgufValueType element_type, std::vector<GgufValue> items) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.element_type = element_type;
  out.items = std::move(items);
  return out;
}

bool GgufValue::integer(int64_t& out) const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kU16: case GgufValueType::kU32: case GgufValueType::kU64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      out = static_cast<int64_t>(u);
      return true;
    case GgufValueType::kI8: case GgufValueType::kI16: case GgufValueType::kI32: case GgufValueType::kI64:
      out = i;
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------- opening

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<GgufFile> file(new GgufFile());
  file->self_ = file;
  file->path_ = path;
  file->map_ = std::make_unique<FileMap>(path, 0, "a GGUF header");
  const uint64_t file_size = file->map_->size();
  Cursor in(path, file->map_->data(), file_size);

  if (in.u32("header") != kMagic) throw ModelError(path + ": not a GGUF file (it does not begin with \"GGUF\")");
  const uint32_t version = in.u32("header");
  if ((version & 0xffffu) == 0 && version != 0)
    throw ModelError(path + ": a big-endian GGUF file (version field " + std::to_string(version) +
                     "); only little-endian files are read");
  if (version != 2 && version != 3)
    throw ModelError(path + ": GGUF version " + std::to_string(version) + " is not supported (versions 2 and 3 are)");
  file->version_ = version;
  const uint64_t tensor_count = in.u64("header");
  const uint64_t kv_count = in.u64("header");
  // Each key/value takes at least 13 bytes, each tensor info 24: counts the
  // file cannot hold are refused before anything is allocated for them.
  if (kv_count > in.left() / 13)
    throw ModelError(path + ": header: " + std::to_string(kv_count) + " key/value pairs cannot fit in the file");
  if (tensor_count > in.left() / 24)
    throw ModelError(path + ": header: " + std::to_string(tensor_count) + " tensors cannot fit in the file");

  uint64_t values = 0;
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string key = in.string("metadata key #" + std::to_string(k));
    const std::string what = "metadata key '" + key + "'";
    if (file->metadata_index_.count(key)) in.fail(what, "appears twice");
    const uint32_t raw_type = in.u32(what);
    GgufValue value = read_value(in, raw_type, what, 0, values);
    file->metadata_index_.emplace(key, file->metadata_.size());
    file->metadata_.emplace_back(key, std::move(value));
  }

  if (const GgufValue* a = file->find("general.alignment")) {
    if (a->type != GgufValueType::kU32)
      throw ModelError(path + ": metadata key 'general.alignment' must be UINT32, got " +
                       gguf_value_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      throw ModelError(path + ": metadata key 'general.alignment' is " + std::to_string(a->u) +
                       ", not a power of two");
    file->alignment_ = a->u;
  } else {
    file->alignment_ = kDefaultAlignment;
  }
  if (const GgufValue* arch = file->find("general.architecture"); arch && arch->type != GgufValueType::kString)
    throw ModelError(path + ": metadata key 'general.architecture' must be STRING, got " +
                     gguf_value_type_name(arch->type));

  for (uint64_t k = 0; k < tensor_count; ++k) {
    GgufTensor t;
    t.name = in.string("tensor info #" + std::to_string(k));
    const std::string what = tensor_where(t.name);
    if (file->index_.count(t.name)) in.fail(what, "appears twice");
    const uint32_t n_dims = in.u32(what);
    if (n_dims > kMaxDims)
      in.fail(what, std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) + " are read)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t extent = in.u64(what);
      if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, extent, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        in.fail(what, "the element count of its dimensions overflows");
      t.ne.push_back(extent);
    }
    const uint32_t raw_type = in.u32(what);
    const math::GgmlTypeTraits* traits = math::find_ggml_type(raw_type);
    if (!traits) in.fail(what, "unknown ggml type " + std::to_string(raw_type));
    t.type = traits->type;
    t.offset = in.u64(what);
    const uint64_t row = n_dims ? t.ne[0] : 1;
    if (row % static_cast<uint64_t>(traits->block_size) != 0)
      in.fail(what, "rows of " + std::to_string(row) + " elements are not a whole number of " + traits->name +
                        " blocks of " + std::to_string(traits->block_size));
    if (!ggml_bytes(t.type, numel, t.nbytes)) in.fail(what, "its byte size overflows");
    for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) t.shape.push_back(static_cast<int64_t>(*it));
    file->index_.emplace(t.name, file->tensors_.size());
    file->tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t data_offset = (in.pos() + file->alignment_ - 1) / file->alignment_ * file->alignment_;
  file->data_section_ = file->map_->data() + std::min(data_offset, file_size);
  const uint64_t data_size = data_offset <= file_size ? file_size - data_offset : 0;
  for (GgufTensor& t : file->tensors_) {
    const std::string where = path + ": " + tensor_where(t.name) + ": ";
    if (t.offset % file->alignment_ != 0)
      throw ModelError(where + "offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                       std::to_string(file->alignment_));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw ModelError(where + "its " + std::to_string(t.nbytes) + " bytes at offset " + std::to_string(t.offset) +
                       " end beyond the data section (" + std::to_string(data_size) + " bytes; truncated file?)");
    // ComfyUI-GGUF's real shape of a tensor stored as rows of 256.
    if (const GgufValue* orig = file->find(kOrigShapePrefix + t.name)) {
      const std::string key = path + ": metadata key '" + kOrigShapePrefix + t.name + "': ";
      if (orig->type != GgufValueType::kArray || orig->items.size() > kMaxDims)
        throw ModelError(key + "expected an array of at most " + std::to_string(kMaxDims) + " integers");
      Shape shape;
      uint64_t numel = 1;
      for (const GgufValue& d : orig->items) {
        int64_t extent = 0;
        if (!d.integer(extent) || extent < 0) throw ModelError(key + "expected non-negative integers");
        if (__builtin_mul_overflow(numel, static_cast<uint64_t>(extent), &numel))
          throw ModelError(key + "the element count overflows");
        shape.push_back(extent);
      }
      if (numel != static_cast<uint64_t>(shape_numel(t.shape)))
        throw ModelError(key + "shape " + shape_str(shape) + " holds " + std::to_string(numel) + " elements, but " +
                         tensor_where(t.name) + " holds " + std::to_string(shape_numel(t.shape)));
      t.shape = std::move(shape);
    }
  }

  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : file->tensors_)
    if (t.nbytes) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k)
    if (by_offset[k]->offset < by_offset[k - 1]->offset + by_offset[k - 1]->nbytes)
      throw ModelError(path + ": tensors '" + by_offset[k - 1]->name + "' and '" + by_offset[k]->name +
                       "' overlap in the data section");

  for (const GgufTensor& t : file->tensors_) {
    TensorInfo info;
    info.name = t.name;
    info.type = loaded_type(t.type);
    info.shape = t.shape;
    info.begin = t.offset;
    info.end = t.offset + t.nbytes;
    info.ggml_type = t.type;
    file->infos_.push_back(std::move(info));
  }
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<std::string> GgufFile::architecture() const {
  const GgufValue* v = find("general.architecture");
  if (!v) return std::nullopt;
  return v->s;  // a string: checked at open
}

size_t GgufFile::index_of(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw ModelError(path_ + ": missing tensor '" + name + "'");
  return it->second;
}

const GgufTensor& GgufFile::tensor(const std::string& name) const { return tensors_[index_of(name)]; }
const TensorInfo& GgufFile::info(const std::string& name) const { return infos_[index_of(name)]; }
const uint8_t* GgufFile::data(const std::string& name) const { return data_section_ + tensor(name).offset; }

std::vector<std::string> GgufFile::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, i] : index_) out.push_back(name);
  return out;
}

// ---------------------------------------------------------------- loading

Tensor GgufFile::load_elements(size_t i, int64_t first, int64_t count, const Shape& out_shape) const {
  const GgufTensor& t = tensors_[i];
  const uint8_t* base = data_section_ + t.offset;
  DType dtype;
  if (!is_block_type(t.type) && tensor_dtype(infos_[i].type, dtype)) {
    const size_t element = dtype_size(dtype);
    const uint8_t* src = base + static_cast<uint64_t>(first) * element;
    if (reinterpret_cast<uintptr_t>(src) % element == 0)
      return Tensor::borrow(const_cast<uint8_t*>(src), dtype, out_shape, self_.lock());
    Tensor out = Tensor::empty(out_shape, Device::kCPU, dtype);
    if (count) std::memcpy(out.raw(), src, static_cast<size_t>(count) * element);
    return out;
  }
  const math::GgmlTypeTraits& traits = math::ggml_traits(t.type);
  if (!traits.dequantized)
    throw ModelError(path_ + ": " + tensor_where(t.name) + " has ggml type " + traits.name +
                     ", which ditgen does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
                     "Q5_K, Q6_K)");
  Tensor out = Tensor::empty(out_shape, Device::kCPU, DType::kF32);
  if (count) dequantize(t.type, base, first, count, out.data());
  return out;
}

Tensor GgufFile::load(const std::string& name) const {
  const size_t i = index_of(name);
  return load_elements(i, 0, shape_numel(tensors_[i].shape), tensors_[i].shape);
}

Tensor GgufFile::load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const size_t i = index_of(name);
  const Shape& shape = tensors_[i].shape;
  if (shape.empty() || row_begin < 0 || row_end < row_begin || row_end > shape[0])
    throw ModelError(path_ + ": " + tensor_where(name) + ": rows [" + std::to_string(row_begin) + ", " +
                     std::to_string(row_end) + ") out of range for shape " + shape_str(shape));
  const int64_t row = shape[0] ? shape_numel(shape) / shape[0] : 0;
  Shape out_shape = shape;
  out_shape[0] = row_end - row_begin;
  return load_elements(i, row_begin * row, (row_end - row_begin) * row, out_shape);
}

Tensor GgufFile::load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const {
  const size_t i = index_of(name);
  const Shape& shape = tensors_[i].shape;
  if (shape.size() != 2 || col_begin < 0 || col_end < col_begin || col_end > shape[1])
    throw ModelError(path_ + ": " + tensor_where(name) + ": columns [" + std::to_string(col_begin) + ", " +
                     std::to_string(col_end) + ") out of range for shape " + shape_str(shape));
  const int64_t rows = shape[0], cols = shape[1], width = col_end - col_begin;
  Tensor out;
  for (int64_t r = 0; r < rows && width; ++r) {  // (no columns: no work, however many rows)
    const Tensor part = load_elements(i, r * cols + col_begin, width, {1, width});
    if (!out.defined()) out = Tensor::empty({rows, width}, Device::kCPU, part.dtype());
    if (width) std::memcpy(static_cast<uint8_t*>(out.raw()) + r * part.nbytes(), part.raw(), part.nbytes());
  }
  if (!out.defined())  // nothing read: an empty tensor of the type's dtype (checked by load_elements)
    out = Tensor::empty({rows, width}, Device::kCPU, load_elements(i, 0, 0, {0}).dtype());
  release_pages(name);
  return out;
}

void GgufFile::release_pages(const std::string& name) const {
  const GgufTensor& t = tensor(name);
  map_->release_bytes(data_section_ + t.offset, t.nbytes);
}

void GgufFile::release_pages(const std::string& name, const Tensor& view) const {
  const GgufTensor& t = tensor(name);
  const uint8_t* begin = data_section_ + t.offset;
  const auto* at = static_cast<const uint8_t*>(view.raw());
  if (!view.is_cpu() || at < begin || at + view.nbytes() > begin + t.nbytes)
    throw std::invalid_argument(path_ + ": release_pages: the view does not lie inside tensor '" + name + "'");
  map_->release_bytes(at, view.nbytes());
}

}  // namespace ditgen::io
