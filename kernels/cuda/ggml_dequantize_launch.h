// How the GGUF block dequantization kernel (ggml_dequantize.cu) is launched,
// host-only so the CPU tests check it (tests/cuda_host/
// test_ggml_dequantize_launch.cpp). One thread per block of the format: a
// CTA dequantizes a tile of `threads` consecutive blocks into shared memory
// through the format's DITGEN_HD dequantizer (kernels/math/ggml_blocks.h),
// then stores the tile's elements in order (the blocks of a row-major
// (rows, k) matrix are its elements in order), coalesced, each rounded once
// to the output type. In shared memory a block's elements lie `stride`
// floats apart from the next block's: elements + 1 for the quantized
// formats, so the 32 threads of a warp writing element l of their blocks hit
// 32 different banks. A tile stays within the 48 KiB of static shared memory
// every GPU gives a CTA; the CTAs loop over the tiles `grid` apart.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/math/ggml_blocks.h"

namespace ditgen::cuda {

// Blocks of a format of `elements` per block in one tile (= threads per CTA).
constexpr int ggml_tile_blocks(int32_t elements) { return elements >= math::kQK_K ? 32 : 256; }
// Floats from one block's elements to the next block's in the tile.
constexpr int ggml_tile_stride(int32_t elements) { return elements % 32 == 0 ? elements + 1 : elements; }
// The tile's shared memory.
constexpr size_t ggml_tile_bytes(int32_t elements) {
  return static_cast<size_t>(ggml_tile_blocks(elements)) * static_cast<size_t>(ggml_tile_stride(elements)) *
         sizeof(float);
}
inline constexpr size_t kStaticSharedBytes = 48 * 1024;
// At most this many CTAs, each looping over tiles (far below the x limit).
inline constexpr int64_t kMaxDequantizeCtas = int64_t{1} << 16;

struct GgmlDequantizeLaunch {
  math::GgmlType type;
  int64_t blocks = 0;  // blocks in the whole matrix: rows * k / block_size
  int threads = 0;     // per CTA: ggml_tile_blocks of the format
  unsigned grid = 0;   // CTAs (0: nothing to do)
};

// The launch for a (rows, k) matrix of ggml type number `raw_type` held in
// `bytes` bytes of blocks, row after row. std::invalid_argument when ditgen
// does not read the type, k is not a whole number of its blocks, or `bytes`
// is not the matrix's size.
inline GgmlDequantizeLaunch ggml_dequantize_launch(uint32_t raw_type, int64_t rows, int64_t k, size_t bytes) {
  const math::GgmlTypeTraits* traits = math::find_ggml_type(raw_type);
  const std::string what = "dequantize_ggml: a (" + std::to_string(rows) + ", " + std::to_string(k) + ") matrix of " +
                           (traits ? std::string(traits->name) : "ggml type " + std::to_string(raw_type));
  const int64_t expected = math::ggml_matrix_bytes(raw_type, rows, k);
  if (expected < 0)
    throw std::invalid_argument(what + (traits && traits->dequantized ? " (rows of whole blocks expected)"
                                                                       : " (not a type ditgen reads)"));
  if (static_cast<uint64_t>(expected) != bytes)
    throw std::invalid_argument(what + " is " + std::to_string(expected) + " bytes, not " + std::to_string(bytes));
  GgmlDequantizeLaunch launch;
  launch.type = traits->type;
  launch.blocks = rows * (k / traits->block_size);
  launch.threads = ggml_tile_blocks(traits->block_size);
  const int64_t tiles = (launch.blocks + launch.threads - 1) / launch.threads;
  launch.grid = static_cast<unsigned>(tiles < kMaxDequantizeCtas ? tiles : kMaxDequantizeCtas);
  return launch;
}

}  // namespace ditgen::cuda
