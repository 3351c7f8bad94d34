// Writing the weights of a WeightStore into one GGUF or safetensors file,
// each tensor under a new name and in a new type (`ditgen convert`; which
// names and types is the model layer's choice: models/weight_conversion.h).
//
// Memory: tensors are produced one at a time by the writers' Fill callbacks
// (io/gguf_writer.h, write_safetensors_streamed), each read from the mapped
// source a band of rows at a time, widened to float32, converted into the
// output buffer, and the source pages released afterwards, so ditgen holds
// one output tensor and one float32 band, never the model in float32. A
// tensor already stored in its output type (a GGUF Q8_0 weight written as
// Q8_0, a bfloat16 one as BF16) is copied byte for byte: requantizing
// blocks would lose precision again. Both files are written to a temporary
// name beside the target and renamed when complete (util/atomic_file.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/ggml_quants.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"

namespace ditgen::io {

struct ConvertedTensor {
  std::string source;  // its name in the WeightStore
  std::string name;    // its name in the output file
  GgmlType type;       // its type there (F32 / F16 / BF16 in a safetensors file)
};

// llama.cpp's general.file_type (gguf-py's LlamaFileType) of a file whose
// quantized tensors are all `type`: MOSTLY_Q8_0 (7) for Q8_0, the "_S"
// type of a K-quant (MOSTLY_Q4_K_S, 14, for Q4_K), ALL_F32 (0) for F32.
uint32_t gguf_file_type(GgmlType type);

// A GGUF writer with city96's keys: general.architecture (`architecture`;
// "" for none), general.quantization_version 2 and general.file_type
// (gguf_file_type(file_type)); the tensors are added to it in order.
GgufWriter converted_gguf_writer(const std::string& architecture, GgmlType file_type);

// A GGUF file as city96's are: converted_gguf_writer's keys, then the
// tensors in the order given.
void write_converted_gguf(const WeightStore& weights, const std::vector<ConvertedTensor>& tensors,
                          const std::string& architecture, GgmlType file_type, const std::string& path,
                          const WriteProgress& progress = {});

// A safetensors file (F32, F16 or BF16 tensors; std::invalid_argument for
// another type).
void write_converted_safetensors(const WeightStore& weights, const std::vector<ConvertedTensor>& tensors,
                                 const std::map<std::string, std::string>& metadata, const std::string& path,
                                 const WriteProgress& progress = {});

// The bytes of one tensor in its output type (what the Fills run): `bytes`
// must be its size in that type. ModelError naming the source file and
// tensor for a value the type cannot hold (a NaN or infinity in a block).
void convert_tensor(const WeightStore& weights, const ConvertedTensor& tensor, uint8_t* out, uint64_t bytes);

}  // namespace ditgen::io
