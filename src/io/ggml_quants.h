// ggml's element types on the host: names, sizes, dequantization of any
// element range of a tensor into float32 (the per-block arithmetic of
// kernels/math/ggml_blocks.h, bit-identical to gguf-py's dequantize), and
// quantization of float32 rows into the block formats, bit-identical to
// gguf-py's numpy quantizers (gguf/quants.py) where gguf-py has one.
//
// Quantizers: F32, F16, BF16 (conversion, rounding to nearest even; a NaN
// becomes the quiet NaN torch gives, where gguf-py would keep its payload),
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (gguf-py's: one rounding per numpy
// operation, ties of Q8_0 away from zero, the others truncating q + 0.5),
// and Q2_K .. Q6_K after ggml's reference quantizers (io/ggml_kquants.h:
// gguf-py has none; checked by their round-trip error).
//
// Both directions split large ranges over OpenMP threads (whole blocks per
// thread); each block is independent, so the result does not depend on the
// thread count.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/math/ggml_blocks.h"

namespace ditgen::io {

using math::GgmlType;

// The type named `name`, case-insensitively ("q4_k", "BF16"); false when
// ggml has no such type.
bool parse_ggml_type(const std::string& name, GgmlType& out);

// Whether a row of `elements` elements is a whole number of `type`'s blocks.
bool whole_blocks(GgmlType type, int64_t elements);
// Bytes of `elements` elements of `type` (a whole number of blocks; false on
// a partial block or 64-bit overflow).
bool ggml_bytes(GgmlType type, uint64_t elements, uint64_t& bytes);

// Elements [first, first + count) of the tensor of `type` whose data begins
// at `data`, into out[0, count). `first` and `count` need not fall on block
// boundaries (a partial block at either end is decoded whole into a scratch
// block and the wanted part copied out). std::invalid_argument for a type
// ditgen does not dequantize (math::GgmlTypeTraits::dequantized).
void dequantize(GgmlType type, const uint8_t* data, int64_t first, int64_t count, float* out);

// Whether quantize() writes `type` (the list above).
bool can_quantize(GgmlType type);
// `count` floats (a whole number of blocks) into ggml_bytes(type, count)
// bytes at `out`. std::invalid_argument for a type without a quantizer, a
// partial block, or a NaN or infinity in the input of a block-quantized
// type (its scale would carry it into every element of the block).
void quantize(GgmlType type, const float* in, int64_t count, uint8_t* out);

}  // namespace ditgen::io
