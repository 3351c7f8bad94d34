// safetensors: reading (mmap + a header validated field by field), writing
// (each tensor in its dtype, atomic) and the per-directory WeightStore
// (single file or shards).
//
// Format: u64 little-endian header length N, N bytes of JSON, then the data
// section. The JSON maps tensor names to {"dtype", "shape", "data_offsets"}
// (offsets relative to the data section) plus an optional "__metadata__"
// object of strings. Everything a hostile file could lie about (lengths,
// offsets, shapes, dtypes, types of JSON values) is checked against the file
// size before a single tensor byte is touched; tensors may not overlap.
//
// Tensors load in their stored dtype: nothing here converts (that is the
// consumer's choice, once, with Tensor::to / ops::convert). The mapping lives
// as long as the SafetensorsFile; borrowed tensors hold a shared_ptr to it
// (via self_), so dropping the file handle early is safe. The mapping is
// PROT_READ: borrowed tensors must never be written.
#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "io/file_map.h"
#include "io/gguf.h"
#include "io/model_dir.h"
#include "kernels/math/small_floats.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/strings.h"

static_assert(std::endian::native == std::endian::little, "safetensors data is little endian; so must the host be");

namespace ditgen::io {
namespace {

using nlohmann::json;

// A header larger than this is hostile or broken (real ones are < 1 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct StoredTypeEntry {
  StoredType type;
  const char* name;
  size_t size;
  bool loadable;  // has a tensor DType:
  DType dtype;    // this one
};
constexpr StoredTypeEntry kStoredTypes[] = {
    {StoredType::kF64, "F64", 8, false, DType::kF32},         {StoredType::kF32, "F32", 4, true, DType::kF32},
    {StoredType::kF16, "F16", 2, true, DType::kF16},          {StoredType::kBF16, "BF16", 2, true, DType::kBF16},
    {StoredType::kI64, "I64", 8, true, DType::kI64},          {StoredType::kI32, "I32", 4, true, DType::kI32},
    {StoredType::kI16, "I16", 2, false, DType::kF32},         {StoredType::kI8, "I8", 1, false, DType::kF32},
    {StoredType::kU8, "U8", 1, false, DType::kF32},           {StoredType::kBool, "BOOL", 1, false, DType::kF32},
    {StoredType::kF8E4M3, "F8_E4M3", 1, false, DType::kF32},  {StoredType::kF8E5M2, "F8_E5M2", 1, false, DType::kF32},
    {StoredType::kU64, "U64", 8, false, DType::kF32},         {StoredType::kU32, "U32", 4, false, DType::kF32},
    {StoredType::kU16, "U16", 2, false, DType::kF32},
};

const StoredTypeEntry* find_stored_type(const std::string& name) {
  for (const StoredTypeEntry& e : kStoredTypes)
    if (name == e.name) return &e;
  return nullptr;
}

const StoredTypeEntry& entry_of(StoredType t) {
  for (const StoredTypeEntry& e : kStoredTypes)
    if (e.type == t) return e;
  return kStoredTypes[0];  // unreachable: every enumerator has an entry
}

// The file's tag for a tensor dtype (write_safetensors).
const char* tag_of(DType t) {
  for (const StoredTypeEntry& e : kStoredTypes)
    if (e.loadable && e.dtype == t) return e.name;
  return "?";
}

// A JSON non-negative integer (nlohmann stores "5" as unsigned, "-0" as signed).
bool as_u64(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

std::string json_type(const json& j) { return j.type_name(); }

struct ParsedHeader {
  size_t data_offset = 0;
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& meta) {
  if (!meta.is_object())
    throw ModelError(path + ": \"__metadata__\" must be an object of strings, got " + json_type(meta));
  std::map<std::string, std::string> out;
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (!it.value().is_string())
      throw ModelError(path + ": \"__metadata__\" entry '" + it.key() + "' must be a string, got " +
                       json_type(it.value()));
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

TensorInfo parse_tensor_entry(const std::string& path, const std::string& name, const json& entry,
                              uint64_t data_size) {
  const std::string where = path + ": tensor '" + name + "': ";
  if (!entry.is_object()) throw ModelError(where + "header entry must be an object, got " + json_type(entry));
  TensorInfo info;
  info.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) throw ModelError(where + "missing \"dtype\"");
  if (!dtype_it->is_string()) throw ModelError(where + "\"dtype\" must be a string, got " + json_type(*dtype_it));
  const StoredTypeEntry* dtype = find_stored_type(dtype_it->get<std::string>());
  if (!dtype) throw ModelError(where + "unknown dtype '" + dtype_it->get<std::string>() + "'");
  info.type = dtype->type;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) throw ModelError(where + "missing \"shape\"");
  if (!shape_it->is_array()) throw ModelError(where + "\"shape\" must be an array, got " + json_type(*shape_it));
  uint64_t numel = 1;
  for (const json& d : *shape_it) {
    uint64_t dim = 0;
    if (!as_u64(d, dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw ModelError(where + "\"shape\" entries must be non-negative integers, got " + d.dump());
    info.shape.push_back(static_cast<int64_t>(dim));
    if (mul_overflows(numel, dim, numel))
      throw ModelError(where + "the element count of shape " + shape_str(info.shape) + " overflows 64 bits");
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) throw ModelError(where + "missing \"data_offsets\"");
  if (!offsets_it->is_array() || offsets_it->size() != 2 || !as_u64((*offsets_it)[0], info.begin) ||
      !as_u64((*offsets_it)[1], info.end))
    throw ModelError(where + "\"data_offsets\" must be two non-negative integers, got " +
                     (offsets_it->is_array() && offsets_it->size() <= 2 ? offsets_it->dump() : json_type(*offsets_it)));
  // (built by appending: GCC 12 warns falsely on "[" + std::to_string(...))
  std::string offsets = "[";
  offsets.append(std::to_string(info.begin)).append(", ").append(std::to_string(info.end)).append("]");
  if (info.begin > info.end) throw ModelError(where + "data_offsets " + offsets + " begin after end");
  if (info.end > data_size)
    throw ModelError(where + "data_offsets " + offsets + " end beyond the data section (" +
                     std::to_string(data_size) + " bytes)");
  uint64_t nbytes = 0;
  if (mul_overflows(numel, dtype->size, nbytes))
    throw ModelError(where + "the byte size of shape " + shape_str(info.shape) + " overflows 64 bits");
  if (info.end - info.begin != nbytes)
    throw ModelError(where + "data_offsets " + offsets + " span " + std::to_string(info.end - info.begin) +
                     " bytes, but shape " + shape_str(info.shape) + " of " + dtype->name + " needs " +
                     std::to_string(nbytes));
  return info;
}

// The format says tensors do not overlap; a file where they do is corrupt.
void check_no_overlap(const std::string& path, const std::map<std::string, TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, info] : tensors)
    if (info.end > info.begin) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw ModelError(path + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                       "' overlap in the data section");
}

ParsedHeader parse_header(const std::string& path, const uint8_t* map, uint64_t file_size) {
  uint64_t header_len = 0;
  std::memcpy(&header_len, map, 8);
  if (header_len > kMaxHeaderBytes)
    throw ModelError(path + ": header length " + std::to_string(header_len) + " exceeds the " +
                     std::to_string(kMaxHeaderBytes >> 20) + " MB limit (not a safetensors file?)");
  if (header_len > file_size - 8)
    throw ModelError(path + ": header length " + std::to_string(header_len) + " exceeds the file size (" +
                     std::to_string(file_size) + " bytes; truncated file?)");
  json header;
  try {
    // nlohmann rejects ill-formed UTF-8 inside strings, and parses iteratively
    // (deep nesting cannot overflow the stack).
    header = json::parse(map + 8, map + 8 + header_len);
  } catch (const json::exception& e) {
    throw ModelError(path + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw ModelError(path + ": header must be a JSON object, got " + json_type(header));

  ParsedHeader parsed;
  parsed.data_offset = 8 + header_len;
  const uint64_t data_size = file_size - parsed.data_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      parsed.metadata = parse_metadata(path, it.value());
    else
      parsed.tensors.emplace(it.key(), parse_tensor_entry(path, it.key(), it.value(), data_size));
  }
  check_no_overlap(path, parsed.tensors);
  return parsed;
}

bool is_float8(StoredType t) { return t == StoredType::kF8E4M3 || t == StoredType::kF8E5M2; }

// The tensor dtype `info` loads as (float32 for float8); ModelError naming
// the tensor otherwise.
DType loadable_dtype(const std::string& path, const TensorInfo& info) {
  DType d;
  if (is_float8(info.type)) return DType::kF32;
  if (!tensor_dtype(info.type, d))
    throw ModelError(path + ": tensor '" + info.name + "' has dtype " + stored_type_name(info.type) +
                     ", expected F32, BF16, F16, I32, I64, F8_E4M3 or F8_E5M2");
  return d;
}

// `count` float8 values of type `t` at `src`, decoded as torch's
// .to(torch.float32) (kernels/math/small_floats.h).
void decode_float8(StoredType t, const uint8_t* src, float* dst, int64_t count) {
  if (t == StoredType::kF8E4M3)
    for (int64_t i = 0; i < count; ++i) dst[i] = math::f8e4m3fn_bits_to_f32(src[i]);
  else
    for (int64_t i = 0; i < count; ++i) dst[i] = math::f8e5m2_bits_to_f32(src[i]);
}

}  // namespace

const char* stored_type_name(StoredType t) { return entry_of(t).name; }

size_t stored_type_size(StoredType t) { return entry_of(t).size; }

bool tensor_dtype(StoredType t, DType& out) {
  const StoredTypeEntry& e = entry_of(t);
  if (e.loadable) out = e.dtype;
  return e.loadable;
}

// ---------------------------------------------------------------- SafetensorsFile

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->self_ = file;
  file->path_ = path;

  file->map_ = std::make_unique<FileMap>(path, 8, "a safetensors header");
  ParsedHeader parsed = parse_header(path, file->map_->data(), file->map_->size());
  file->data_ = file->map_->data() + parsed.data_offset;
  file->tensors_ = std::move(parsed.tensors);
  file->metadata_ = std::move(parsed.metadata);
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ModelError(path_ + ": missing tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

Tensor SafetensorsFile::load(const std::string& name) const {
  const TensorInfo& ti = info(name);
  if (ti.shape.empty()) return load_rows_of(ti, 0, 1, ti.shape);  // a scalar: one "row"
  return load_rows_of(ti, 0, ti.shape[0], ti.shape);
}

Tensor SafetensorsFile::load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const TensorInfo& ti = info(name);
  if (ti.shape.empty() || row_begin < 0 || row_end < row_begin || row_end > ti.shape[0])
    throw ModelError(path_ + ": tensor '" + name + "': rows [" + std::to_string(row_begin) + ", " +
                     std::to_string(row_end) + ") out of range for shape " + shape_str(ti.shape));
  Shape out_shape = ti.shape;
  out_shape[0] = row_end - row_begin;
  return load_rows_of(ti, row_begin, row_end, out_shape);
}

Tensor SafetensorsFile::load_rows_of(const TensorInfo& ti, int64_t row_begin, int64_t row_end,
                                     const Shape& out_shape) const {
  const DType dtype = loadable_dtype(path_, ti);
  const int64_t rows = ti.shape.empty() ? 1 : ti.shape[0];
  const int64_t row_elems = rows ? shape_numel(ti.shape) / rows : 0;
  const int64_t count = (row_end - row_begin) * row_elems;
  const size_t elem_size = stored_type_size(ti.type);
  const uint8_t* src = data_ + ti.begin + static_cast<uint64_t>(row_begin * row_elems) * elem_size;
  if (is_float8(ti.type)) {
    Tensor out = Tensor::empty(out_shape, Device::kCPU, DType::kF32);
    decode_float8(ti.type, src, out.numel() ? out.data() : nullptr, count);
    return out;
  }

  // Every element type's size is its alignment (2, 4 or 8 bytes).
  if (reinterpret_cast<uintptr_t>(src) % elem_size == 0)
    return Tensor::borrow(const_cast<uint8_t*>(src), dtype, out_shape, self_.lock());

  Tensor out = Tensor::empty(out_shape, Device::kCPU, dtype);
  if (count) std::memcpy(out.raw(), src, static_cast<size_t>(count) * elem_size);
  return out;
}

Tensor SafetensorsFile::load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const {
  const TensorInfo& ti = info(name);
  if (ti.shape.size() != 2 || col_begin < 0 || col_end < col_begin || col_end > ti.shape[1])
    throw ModelError(path_ + ": tensor '" + name + "': columns [" + std::to_string(col_begin) + ", " +
                     std::to_string(col_end) + ") out of range for shape " + shape_str(ti.shape));
  const DType dtype = loadable_dtype(path_, ti);
  const int64_t rows = ti.shape[0], cols = ti.shape[1], width = col_end - col_begin;
  const size_t elem_size = stored_type_size(ti.type);
  const uint8_t* base = data_ + ti.begin;
  Tensor out = Tensor::empty({rows, width}, Device::kCPU, dtype);
  if (is_float8(ti.type)) {
    for (int64_t r = 0; r < rows && width; ++r)
      decode_float8(ti.type, base + r * cols + col_begin, out.data() + r * width, width);
  } else {
    uint8_t* dst = static_cast<uint8_t*>(out.raw());
    const size_t row_bytes = static_cast<size_t>(width) * elem_size;
    for (int64_t r = 0; r < rows && row_bytes; ++r)
      std::memcpy(dst + r * row_bytes, base + static_cast<uint64_t>(r * cols + col_begin) * elem_size, row_bytes);
  }
  // Every page of the tensor was touched; drop them from this process (they
  // stay in the page cache, shared with the other ranks reading this file).
  release_pages_of(ti);
  return out;
}

void SafetensorsFile::release_pages(const std::string& name) const { release_pages_of(info(name)); }

const uint8_t* SafetensorsFile::bytes(const std::string& name) const { return data_ + info(name).begin; }

void SafetensorsFile::release_pages_of(const TensorInfo& ti) const {
  map_->release_bytes(data_ + ti.begin, ti.end - ti.begin);
}

void SafetensorsFile::release_pages(const std::string& name, const Tensor& view) const {
  const TensorInfo& ti = info(name);
  const uint8_t* begin = data_ + ti.begin;
  const auto* at = static_cast<const uint8_t*>(view.raw());
  if (!view.is_cpu() || at < begin || at + view.nbytes() > begin + (ti.end - ti.begin))
    throw std::invalid_argument(path_ + ": release_pages: the view does not lie inside tensor '" + name + "'");
  map_->release_bytes(at, view.nbytes());
}

// ---------------------------------------------------------------- writing

void write_safetensors_streamed(const std::string& path, const std::vector<SafetensorsOutput>& tensors,
                                const std::map<std::string, std::string>& metadata, const WriteProgress& progress) {
  json header = json::object();
  std::set<std::string> seen;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const SafetensorsOutput& t : tensors) {
    if (t.name == "__metadata__" || !seen.insert(t.name).second)
      throw RuntimeFailure(path + ": cannot write tensor '" + t.name + "': duplicate or reserved name");
    sizes.push_back(static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype));
    header[t.name] = {{"dtype", tag_of(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + sizes.back()}}};
    offset += sizes.back();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  // Pad with spaces (valid JSON whitespace) so the data section starts 8-byte
  // aligned, which keeps every tensor aligned for zero copy as long as those
  // before it end on its element size (all of one dtype, say: the format
  // allows no gaps between tensors to realign).
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  write_file_atomic(path, [&](std::FILE* f) {
    std::fwrite(&header_len, 8, 1, f);
    std::fwrite(text.data(), 1, text.size(), f);
    std::vector<uint8_t> buffer;
    for (size_t k = 0; k < tensors.size(); ++k) {
      if (progress) progress(k, tensors.size(), tensors[k].name);
      if (!sizes[k]) continue;
      buffer.resize(sizes[k]);
      tensors[k].fill(buffer.data(), sizes[k]);
      std::fwrite(buffer.data(), 1, sizes[k], f);
    }
  });
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsOutput> outputs;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined() && tensor.numel() != 0)
      throw RuntimeFailure(path + ": cannot write tensor '" + name + "': it holds no data");
    if (tensor.defined() && !tensor.is_cpu())
      throw RuntimeFailure(path + ": cannot write tensor '" + name + "': it is on " + device_name(tensor.device()));
    const Tensor* t = &tensor;
    outputs.push_back({name, tensor.dtype(), tensor.shape(),
                       [t](uint8_t* out, uint64_t bytes) { std::memcpy(out, t->raw(), bytes); }});
  }
  write_safetensors_streamed(path, outputs, metadata);
}

// ---------------------------------------------------------------- WeightStore

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An index file: `<stem>.safetensors.index.json`, or with a variant as
// transformers and diffusers write it, `<stem>.safetensors.index.<variant>.json`.
bool is_index_name(const std::string& name) {
  const std::string marker = ".safetensors.index.";
  const size_t at = name.find(marker);
  if (at == std::string::npos || at == 0 || !ends_with(name, ".json")) return false;
  const std::string rest = name.substr(at + marker.size());  // "json" or "<variant>.json"
  return rest == "json" || (rest.size() > 5 && rest.find('.') == rest.size() - 5);
}

// One of several candidate files: the diffusers name, then the transformers
// name (both without a variant); anything else is ambiguous.
std::string pick_one(const std::string& dir, const std::vector<std::string>& candidates, const std::string& suffix,
                     const char* what) {
  if (candidates.size() == 1) return candidates[0];
  for (const char* preferred : {"diffusion_pytorch_model", "model"})
    if (std::find(candidates.begin(), candidates.end(), preferred + suffix) != candidates.end())
      return preferred + suffix;
  throw ModelError(dir + ": several " + what + " (" + join(candidates) +
                   "); expected one, or one named diffusion_pytorch_model" + suffix + " or model" + suffix);
}

// A PyTorch checkpoint (.bin, .pt, .pth, .ckpt) in `dir`: weights ditgen
// cannot read, as against no weights at all.
bool pickled_checkpoint_in(const std::string& dir) {
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt") return true;
  }
  return false;
}

}  // namespace

WeightStore WeightStore::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string index_suffix = ".safetensors.index.json", weights_suffix = ".safetensors";
  std::vector<std::string> indexes, weights;
  try {
    if (!fs::is_directory(dir)) throw ModelError(dir + ": not a directory (expected model weights)");
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (is_index_name(name))
        indexes.push_back(name);
      else if (ends_with(name, weights_suffix))
        weights.push_back(name);
    }
  } catch (const fs::filesystem_error& e) {
    throw ModelError(dir + ": cannot list directory: " + e.code().message());
  }
  std::sort(indexes.begin(), indexes.end());
  std::sort(weights.begin(), weights.end());

  WeightStore store;
  store.dir_ = dir;
  if (indexes.empty()) {
    if (weights.empty())
      throw ModelError(dir + (pickled_checkpoint_in(dir)
                                  ? ": no *.safetensors weights, only a .bin/.pt checkpoint (convert it to safetensors: "
                                    "docs/real-models.md)"
                                  : ": the weights are missing (no *.safetensors in this folder, only its config?): the "
                                    "download is incomplete; fetch the model's weights"));
    const std::string file = (fs::path(dir) / pick_one(dir, weights, weights_suffix, "*.safetensors files")).string();
    store.source_ = file;
    store.files_.push_back(SafetensorsFile::open(file));
    for (const std::string& name : store.files_[0]->names()) store.where_[name] = {0, name};
    store.index_scales();
    return store;
  }

  const std::string index_path = (fs::path(dir) / pick_one(dir, indexes, index_suffix, "safetensors index files")).string();
  store.source_ = index_path;
  const json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw ModelError(index_path + ": weight_map: expected an object mapping tensor names to shard files");
  const json& weight_map = index["weight_map"];
  if (weight_map.empty()) throw ModelError(index_path + ": weight_map is empty");

  std::map<std::string, size_t> shard_index;  // shard file name -> index into files_
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const std::string& tensor = it.key();
    if (!it.value().is_string())
      throw ModelError(index_path + ": weight_map." + tensor + ": expected a shard file name, got " +
                       json_type(it.value()));
    const std::string shard = it.value().get<std::string>();
    // Shards live beside the index; a path could point anywhere.
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos)
      throw ModelError(index_path + ": weight_map." + tensor + ": '" + shard +
                       "' is not a file name in the same directory");
    auto found = shard_index.find(shard);
    if (found == shard_index.end()) {
      const fs::path shard_path = fs::path(dir) / shard;
      std::error_code ec;
      if (!fs::is_regular_file(shard_path, ec))
        throw ModelError(index_path + ": shard '" + shard + "' (holding tensor '" + tensor + "') not found in " + dir);
      found = shard_index.emplace(shard, store.files_.size()).first;
      store.files_.push_back(SafetensorsFile::open(shard_path.string()));
    }
    if (!store.files_[found->second]->contains(tensor))
      throw ModelError(index_path + ": tensor '" + tensor + "' is mapped to shard '" + shard +
                       "', which does not contain it");
    store.where_[tensor] = {found->second, tensor};
  }
  store.index_scales();
  return store;
}

WeightStore WeightStore::open_file(const std::string& path, const SingleFileOptions& options) {
  WeightStore store;
  store.dir_ = store.source_ = path;
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);  // a short or unreadable file: the readers say why
  const bool gguf = std::memcmp(magic, "GGUF", 4) == 0;
  if (gguf) {
    std::shared_ptr<GgufFile> file = GgufFile::open(path);
    const std::optional<std::string> arch = file->architecture();
    if (!options.architecture.empty() && arch && *arch != options.architecture)
      throw ModelError(path + ": metadata key 'general.architecture' is '" + *arch + "', expected '" +
                       options.architecture + "' (a GGUF file of another model)");
    store.files_.push_back(std::move(file));
  } else {
    store.files_.push_back(SafetensorsFile::open(path));
  }
  const std::vector<std::string> names = store.files_[0]->names();
  const std::string& prefix = options.prefix;
  const bool strip = !prefix.empty() && std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return n.compare(0, prefix.size(), prefix) == 0;
  });
  for (const std::string& name : names) {
    if (!strip)
      store.where_[name] = {0, name};
    else if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0)
      store.where_[name.substr(prefix.size())] = {0, name};
  }
  if (options.rename && !options.other_naming_probe.empty() && store.where_.count(options.other_naming_probe)) {
    std::map<std::string, Location> renamed;
    for (const auto& [name, at] : store.where_) {
      const std::optional<std::string> model_name = options.rename(name);
      if (!model_name)
        throw ModelError(path + ": tensor '" + at.name + "' is no tensor of this model (the file is in the original "
                         "release's names, and this one has no counterpart in the model's)");
      if (!renamed.emplace(*model_name, at).second)
        throw ModelError(path + ": tensors '" + renamed.at(*model_name).name + "' and '" + at.name +
                         "' both name the model's '" + *model_name + "'");
    }
    store.where_ = std::move(renamed);
  }
  store.index_scales();
  return store;
}

void WeightStore::index_scales() {
  const std::string suffix = ".scale_weight";
  bool has_float8 = false, says_scaled = contains("scaled_fp8"), file_name_says_scaled = false;
  for (const auto& [name, at] : where_) {
    const StoredType t = files_[at.file]->info(at.name).type;
    has_float8 = has_float8 || is_float8(t);
    says_scaled = says_scaled || ends_with(name, suffix);
  }
  for (const auto& file : files_)
    file_name_says_scaled = file_name_says_scaled ||
                            std::filesystem::path(file->path()).filename().string().find("scaled") != std::string::npos;
  if (!says_scaled && !(file_name_says_scaled && has_float8)) return;
  const std::string why = contains("scaled_fp8")          ? "it holds 'scaled_fp8'"
                          : says_scaled                   ? "it holds *.scale_weight tensors"
                                                          : "its file name says scaled";

  for (const auto& [name, at] : where_) {
    if (ends_with(name, suffix)) {  // a scale: its weight exists, and the shapes fit
      const std::string weight = name.substr(0, name.size() - suffix.size()) + ".weight";
      const std::string& file = files_[at.file]->path();
      const TensorInfo& scale = files_[at.file]->info(at.name);
      if (!contains(weight))
        throw ModelError(file + ": tensor '" + name + "' scales tensor '" + weight + "', which is missing");
      const Shape& ws = info(weight).shape;
      const int64_t rows = ws.empty() ? 1 : ws[0], n = shape_numel(scale.shape);
      DType dtype;
      if (!tensor_dtype(scale.type, dtype) || !is_floating(dtype))
        throw ModelError(file + ": tensor '" + name + "' has dtype " + element_type_name(scale) +
                         ", expected F32, BF16 or F16");
      if (n != 1 && !(n == rows && (scale.shape == Shape{rows} || scale.shape == Shape{rows, 1})))
        throw ModelError(file + ": tensor '" + name + "' has shape " + shape_str(scale.shape) +
                         ", expected one value or one per row of '" + weight + "' " + shape_str(ws));
      scales_[weight] = name;
    }
  }
  for (const auto& [name, at] : where_) {
    if (!is_float8(files_[at.file]->info(at.name).type) || name == "scaled_fp8" || !ends_with(name, ".weight"))
      continue;
    const std::string scale = name.substr(0, name.size() - 7) + suffix;
    if (!scales_.count(name))
      throw ModelError(files_[at.file]->path() + ": tensor '" + name + "' is float8 in a scaled checkpoint (" + why +
                       "), but its scale '" + scale + "' is missing");
  }
}

const WeightStore::Location& WeightStore::locate(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw ModelError(source_ + ": missing tensor '" + name + "'");
  return it->second;
}

const TensorInfo& WeightStore::info(const std::string& name) const {
  const Location& at = locate(name);
  return files_[at.file]->info(at.name);
}

const std::string& WeightStore::file_of(const std::string& name) const { return files_[locate(name).file]->path(); }

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, at] : where_) out.push_back(name);
  return out;
}

const std::string* WeightStore::scale_of(const std::string& name) const {
  auto it = scales_.find(name);
  return it == scales_.end() ? nullptr : &it->second;
}

bool WeightStore::points_into_file(const std::string& name, const Tensor& t) const {
  const Location& at = locate(name);
  const TensorInfo& ti = files_[at.file]->info(at.name);
  const uint8_t* begin = files_[at.file]->bytes(at.name);
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return t.is_cpu() && p && p >= begin && p < begin + (ti.end - ti.begin);
}

Tensor WeightStore::load_scaled(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const Location& at = locate(name);
  const WeightFile& file = *files_[at.file];
  const Tensor weight = row_end < 0 ? file.load_f32(at.name) : file.load_rows_f32(at.name, row_begin, row_end);
  const Location& scale_at = locate(scales_.at(name));
  const Tensor scale = files_[scale_at.file]->load_f32(scale_at.name);
  // weight.to(float32) * scale_weight.to(float32): one rounding per element.
  Tensor out = Tensor::empty(weight.shape(), Device::kCPU, DType::kF32);
  const int64_t n = weight.numel(), rows = weight.ndim() ? weight.dim(0) : 1, row = rows ? n / rows : 0;
  if (n == 0) return out;  // (however many rows of nothing)
  const float* w = n ? weight.data() : nullptr;
  float* o = n ? out.data() : nullptr;
  const float* s = scale.data();
  const bool per_row = scale.numel() != 1;
  const int64_t first = row_begin < 0 ? 0 : row_begin;
  for (int64_t r = 0; r < rows; ++r) {
    const float f = per_row ? s[first + r] : s[0];
    for (int64_t k = 0; k < row; ++k) o[r * row + k] = w[r * row + k] * f;
  }
  return out;
}

Tensor WeightStore::edited(const std::string& name, Tensor loaded, int64_t row_begin, int64_t col_begin) const {
  if (!edits_ || !edits_->changes(name)) return loaded;
  // An owned float32 copy: a borrowed tensor is the file's read-only map.
  Tensor part = loaded.dtype() == DType::kF32 ? loaded.clone() : loaded.to(DType::kF32);
  if (points_into_file(name, loaded)) release_pages(name, loaded);
  edits_->apply(name, part, row_begin, col_begin);
  return part;
}

Tensor WeightStore::load(const std::string& name) const {
  if (scales_.count(name)) return edited(name, load_scaled(name, -1, -1), 0, 0);
  const Location& at = locate(name);
  return edited(name, files_[at.file]->load(at.name), 0, 0);
}

Tensor WeightStore::load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  // (the file checks the range)
  if (scales_.count(name)) return edited(name, load_scaled(name, row_begin, row_end), row_begin, 0);
  const Location& at = locate(name);
  return edited(name, files_[at.file]->load_rows(at.name, row_begin, row_end), row_begin, 0);
}

Tensor WeightStore::load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const {
  const Location& at = locate(name);
  Tensor cols = files_[at.file]->load_cols(at.name, col_begin, col_end);
  if (!scales_.count(name)) return edited(name, cols, 0, col_begin);
  if (cols.dtype() != DType::kF32) cols = cols.to(DType::kF32);
  const Location& scale_at = locate(scales_.at(name));
  const Tensor scale = files_[scale_at.file]->load_f32(scale_at.name);
  const int64_t rows = cols.dim(0), width = cols.dim(1);
  for (int64_t r = 0; r < rows && width; ++r)
    for (int64_t k = 0; k < width; ++k) cols.data()[r * width + k] *= scale.data()[scale.numel() == 1 ? 0 : r];
  return edited(name, cols, 0, col_begin);
}

namespace {

// A block-quantized 2-D tensor of a file: its ggml traits (a block of more
// than one element), size and row stride.
struct BlockView {
  const WeightFile* file;
  const TensorInfo* info;
  const math::GgmlTypeTraits* traits;
  int64_t rows, k;
  size_t row_bytes;
};

std::optional<BlockView> block_view(const WeightFile& file, const std::string& stored) {
  const TensorInfo& ti = file.info(stored);
  if (!ti.ggml_type || ti.shape.size() != 2) return std::nullopt;
  const math::GgmlTypeTraits* t = math::find_ggml_type(static_cast<uint32_t>(*ti.ggml_type));
  if (!t || !t->dequantized || t->block_size <= 1) return std::nullopt;
  const size_t row_bytes = static_cast<size_t>(ti.shape[1] / t->block_size) * static_cast<size_t>(t->type_size);
  return BlockView{&file, &ti, t, ti.shape[0], ti.shape[1], row_bytes};
}

// [begin, end) within [0, limit) of the tensor's rows or columns.
void check_span(const BlockView& v, const char* what, int64_t begin, int64_t end, int64_t limit,
                const std::string& name) {
  if (begin < 0 || end < begin || end > limit)
    throw std::out_of_range(v.file->path() + ": " + what + " [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of tensor '" + name + "' " + shape_str(v.info->shape));
}

}  // namespace

std::optional<Tensor> WeightStore::load_block_rows(const std::string& name, int64_t row_begin, int64_t row_end,
                                                   DType arithmetic) const {
  const Location& at = locate(name);
  const std::optional<BlockView> v = block_view(*files_[at.file], at.name);
  if (!v) return std::nullopt;
  if (edits_ && edits_->changes(name)) throw ConfigError(block_edit_refusal(name));
  check_span(*v, "rows", row_begin, row_end, v->rows, name);
  const uint8_t* bytes = v->file->bytes(at.name) + static_cast<size_t>(row_begin) * v->row_bytes;
  return Tensor::block_quantized(bytes, static_cast<size_t>(row_end - row_begin) * v->row_bytes,
                                 static_cast<uint32_t>(v->traits->type), {row_end - row_begin, v->k}, arithmetic,
                                 files_[at.file]);
}

std::optional<Tensor> WeightStore::load_block_cols(const std::string& name, int64_t col_begin, int64_t col_end,
                                                   DType arithmetic) const {
  const Location& at = locate(name);
  const std::optional<BlockView> v = block_view(*files_[at.file], at.name);
  if (!v) return std::nullopt;
  if (edits_ && edits_->changes(name)) throw ConfigError(block_edit_refusal(name));
  check_span(*v, "columns", col_begin, col_end, v->k, name);
  const WeightFile& file = *v->file;
  const TensorInfo& ti = *v->info;
  const math::GgmlTypeTraits* traits = v->traits;
  const int64_t rows = v->rows, k = v->k, block = traits->block_size;
  if (col_begin % block != 0 || col_end % block != 0)
    throw ConfigError(file.path() + ": tensor '" + name + "' " + shape_str(ti.shape) + " is " + traits->name +
                      ", blocks of " + std::to_string(block) + " along its rows: tensor parallelism's split at " +
                      "columns [" + std::to_string(col_begin) + ", " + std::to_string(col_end) +
                      ") cuts a block (choose a tp whose share of " + std::to_string(k) + " is a multiple of " +
                      std::to_string(block) + ")");
  const size_t row_bytes = v->row_bytes;
  const size_t first = static_cast<size_t>(col_begin / block) * static_cast<size_t>(traits->type_size);
  const size_t width = static_cast<size_t>((col_end - col_begin) / block) * static_cast<size_t>(traits->type_size);
  auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows) * width);
  const uint8_t* src = file.bytes(at.name);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(copy->data() + static_cast<size_t>(r) * width, src + static_cast<size_t>(r) * row_bytes + first, width);
  file.release_pages(at.name);
  const void* data = copy->data();
  const size_t bytes = copy->size();  // read before the move below: argument order is unspecified
  return Tensor::block_quantized(data, bytes, static_cast<uint32_t>(traits->type), {rows, col_end - col_begin},
                                 arithmetic, std::move(copy));
}

bool WeightStore::block_quantized(const std::string& name) const {
  const Location& at = locate(name);
  return block_view(*files_[at.file], at.name).has_value();
}

std::string WeightStore::block_edit_refusal(const std::string& name) const {
  return file_of(name) + ": tensor '" + name + "' is " + element_type_name(info(name)) +
         " (GGUF blocks): a LoRA would merge a change into it, which needs a float copy of the weight and is "
         "not supported: a low-rank (lora_A / lora_B) change is applied beside such a weight at run time "
         "(lora_apply \"runtime\", the default for it); a full-weight .diff is not; give model.transformer a "
         "float file (ditgen convert --type bf16)";
}

Tensor WeightStore::load_f32(const std::string& name) const {
  if (edits_ && edits_->changes(name)) return load(name);  // float32 already
  if (scales_.count(name)) return load_scaled(name, -1, -1);
  const Location& at = locate(name);
  return files_[at.file]->load_f32(at.name);
}

Tensor WeightStore::load_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const Tensor t = load_rows(name, row_begin, row_end);
  return t.dtype() == DType::kF32 ? t : t.to(DType::kF32);
}

void WeightStore::release_pages(const std::string& name) const {
  const Location& at = locate(name);
  files_[at.file]->release_pages(at.name);
}

void WeightStore::release_pages(const std::string& name, const Tensor& view) const {
  const Location& at = locate(name);
  files_[at.file]->release_pages(at.name, view);
}

void WeightStore::expect(const std::string& name, const Shape& shape) const {
  const TensorInfo& ti = info(name);
  const std::string& file = file_of(name);
  // Model weights are floating (an index tensor loads, but is no weight).
  DType dtype;
  const bool floating = ti.ggml_type ? tensor_dtype(ti.type, dtype) && is_floating(dtype)
                                     : is_float8(ti.type) || (tensor_dtype(ti.type, dtype) && is_floating(dtype));
  if (!floating)
    throw ModelError(file + ": tensor '" + name + "' has dtype " + element_type_name(ti) +
                     ", expected F32, BF16 or F16 (or float8, or a GGUF block type)");
  if (ti.shape != shape)
    throw ModelError(file + ": tensor '" + name + "' has shape " + shape_str(ti.shape) + ", expected " +
                     shape_str(shape) + " (from config.json)");
}

}  // namespace ditgen::io
