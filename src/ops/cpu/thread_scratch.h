// A thread's reused scratch buffer for the CPU ops: at least n elements of
// T, grown when a call needs more, never shrunk, so a kernel called every
// denoising step allocates only on its first call. Tag keeps the buffers of
// different uses apart (each (T, Tag) pair is one buffer per thread): one
// per use that can be live at once, listed here so no two collide (a
// GEMM's widened weight block is still being read while oneDNN writes its
// dense output).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ditgen::ops::cpu {

enum ScratchTag {
  kWidenedWeight,      // gemm.cpp: a block of 16-bit weight rows widened to float32
  kRoundedInput,       // gemm.cpp: a block of input rows rounded to bfloat16
  kRoundedInputF32,    // gemm.cpp: the same as float32 values (the emulated bf16 path)
  kDenseMatmulOutput,  // onednn_matmul.cpp: a strided output's contiguous stand-in
  kMatmulScratchpad,   // onednn_matmul.cpp, int8_matmul.cpp: oneDNN's scratchpad for one matmul call
  kQuantizedInput,     // int8_matmul.cpp: the input rows quantized to int8
  kQuantizedInputScales,  // int8_matmul.cpp: their per-row scales
  kInt8MatmulSums,     // int8_matmul.cpp: the int32 sums of a tile (or of the whole product) before scaling
  kBlockBandBf16,      // gemm.cpp: a band of block-quantized weight rows dequantized and rounded to bfloat16
  kAttentionKeysValues,   // attention_onednn.cpp: a key chunk's keys and values packed for oneDNN (caller's thread)
  kAttentionHeadRows,     // attention_onednn.cpp: one head's key or value rows in bfloat16, before packing
  kAttentionRowState,     // attention_onednn.cpp: running max and sum per (head, query) (caller's thread)
  kAttentionAccumulator,  // attention_onednn.cpp: unnormalised outputs across key chunks (caller's thread)
  kAttentionQueries,      // attention_onednn.cpp: a query block scaled and rounded to bfloat16
  kAttentionScores,       // attention_onednn.cpp: a query block's scores, then probabilities (float32)
  kAttentionProbs,        // attention_onednn.cpp: the probabilities rounded to bfloat16
  kAttentionOutput,       // attention_onednn.cpp: a query block's P V (float32)
};

// A 64-byte aligned unit, for buffers oneDNN reads as blocks of its own.
struct alignas(64) CacheLine {
  unsigned char bytes[64];
};

template <class T, ScratchTag Tag>
T* thread_scratch(int64_t n) {
  thread_local std::unique_ptr<T[]> buf;
  thread_local int64_t size = 0;
  if (n > size) {
    buf.reset(new T[static_cast<size_t>(n)]);
    size = n;
  }
  return buf.get();
}

}  // namespace ditgen::ops::cpu
