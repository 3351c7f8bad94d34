// See weight_convert.h. A tensor is produced in bands of whole leading-
// dimension rows (kBandElements values at most, one row at least); a band
// is whole blocks of the output type whenever a row is, which the model
// layer's plan guarantees for every block-quantized tensor (2-D, rows of
// whole blocks). A tensor whose rows are not (an F32 scalar, say, has one
// row) is converted in one band.
#include "io/weight_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "io/gguf_writer.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

constexpr int64_t kBandElements = int64_t{1} << 22;  // 16 MiB of float32

// The tensor dtype of a float output type; false for a block type.
bool float_dtype(GgmlType type, DType& out) {
  switch (type) {
    case GgmlType::kF32: out = DType::kF32; return true;
    case GgmlType::kF16: out = DType::kF16; return true;
    case GgmlType::kBF16: out = DType::kBF16; return true;
    default: return false;
  }
}

// ModelError for the first NaN or infinity of a band bound for a block
// type, naming the tensor and the element (a block's scale would carry it
// into every value of the block).
void require_finite(const WeightStore& weights, const ConvertedTensor& t, const float* values, int64_t count,
                    int64_t first) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      throw ModelError(weights.file_of(t.source) + ": tensor '" + t.source + "': element " +
                       std::to_string(first + i) + " is " + std::to_string(values[i]) + ", which " +
                       math::ggml_traits(t.type).name + " cannot hold (finite values only)");
}

}  // namespace

void convert_tensor(const WeightStore& weights, const ConvertedTensor& t, uint8_t* out, uint64_t bytes) {
  const TensorInfo& info = weights.info(t.source);
  const int64_t numel = shape_numel(info.shape);
  uint64_t need = 0;
  if (!ggml_bytes(t.type, static_cast<uint64_t>(numel), need) || need != bytes)
    throw std::logic_error("convert_tensor: tensor '" + t.source + "' " + shape_str(info.shape) + " in " +
                           math::ggml_traits(t.type).name + " is not " + std::to_string(bytes) + " bytes");
  if (numel == 0) return;
  const math::GgmlTypeTraits& traits = math::ggml_traits(t.type);
  const int64_t rows = info.shape.empty() ? 1 : info.shape[0], row = numel / rows;
  const bool whole_rows = row % traits.block_size == 0;
  const int64_t band = whole_rows ? std::max<int64_t>(1, kBandElements / row) : rows;
  const uint64_t row_bytes = whole_rows ? static_cast<uint64_t>(row / traits.block_size) * traits.type_size : 0;
  DType out_dtype = DType::kF32;
  const bool float_out = float_dtype(t.type, out_dtype);
  // Blocks of the output type already: copied, never requantized.
  const bool same_blocks = !float_out && info.ggml_type == t.type && !weights.scale_of(t.source);
  for (int64_t r0 = 0; r0 < rows; r0 += band) {
    const int64_t r1 = std::min(rows, r0 + band);
    uint8_t* dst = out + static_cast<uint64_t>(r0) * row_bytes;
    if (same_blocks)
      if (const std::optional<Tensor> blocks = weights.load_block_rows(t.source, r0, r1, DType::kF32)) {
        std::memcpy(dst, blocks->raw(), blocks->nbytes());
        continue;
      }
    Tensor part = weights.load_rows(t.source, r0, r1);
    if (float_out && part.dtype() == out_dtype) {  // already in the output dtype
      std::memcpy(dst, part.raw(), part.nbytes());
      continue;
    }
    if (part.dtype() != DType::kF32) part = part.to(DType::kF32);
    if (!float_out) require_finite(weights, t, part.data(), part.numel(), r0 * row);
    quantize(t.type, part.data(), part.numel(), dst);
  }
  weights.release_pages(t.source);
}

uint32_t gguf_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;
    case GgmlType::kQ4_K: return 14;
    case GgmlType::kQ5_K: return 16;
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kBF16: return 32;
    default:
      throw std::invalid_argument(std::string("gguf_file_type: no llama.cpp file type for ") +
                                  math::ggml_traits(type).name);
  }
}

GgufWriter converted_gguf_writer(const std::string& architecture, GgmlType file_type) {
  GgufWriter writer(architecture);
  writer.add("general.quantization_version", GgufValue::unsigned_of(GgufValueType::kU32, 2));
  writer.add("general.file_type", GgufValue::unsigned_of(GgufValueType::kU32, gguf_file_type(file_type)));
  return writer;
}

void write_converted_gguf(const WeightStore& weights, const std::vector<ConvertedTensor>& tensors,
                          const std::string& architecture, GgmlType file_type, const std::string& path,
                          const WriteProgress& progress) {
  GgufWriter writer = converted_gguf_writer(architecture, file_type);
  for (const ConvertedTensor& t : tensors)
    writer.add_tensor(t.name, t.type, weights.info(t.source).shape,
                      [&weights, t](uint8_t* out, uint64_t bytes) { convert_tensor(weights, t, out, bytes); });
  writer.write(path, progress);
}

void write_converted_safetensors(const WeightStore& weights, const std::vector<ConvertedTensor>& tensors,
                                 const std::map<std::string, std::string>& metadata, const std::string& path,
                                 const WriteProgress& progress) {
  std::vector<SafetensorsOutput> outputs;
  for (const ConvertedTensor& t : tensors) {
    DType dtype = DType::kF32;
    if (!float_dtype(t.type, dtype))
      throw std::invalid_argument("write_converted_safetensors: tensor '" + t.name + "' of type " +
                                  math::ggml_traits(t.type).name + ": safetensors holds F32, F16 or BF16 here");
    outputs.push_back({t.name, dtype, weights.info(t.source).shape,
                       [&weights, t](uint8_t* out, uint64_t bytes) { convert_tensor(weights, t, out, bytes); }});
  }
  write_safetensors_streamed(path, outputs, metadata, progress);
}

}  // namespace ditgen::io
