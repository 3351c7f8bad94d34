// The host side of the CUDA GGUF dequantization (kernels/cuda/
// ggml_dequantize_launch.h), no GPU needed: the size checks against the
// block formats' sizes of ggml's table, the tile fitting static shared
// memory with its stores free of bank conflicts, and the grid covering every
// block. The kernel's values are checked against the CPU's in
// tests/gpu/test_ggml_dequantize.cpp.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/ggml_dequantize_launch.h"

using namespace ditgen;
using cuda::ggml_dequantize_launch;

namespace {

// The 13 types ditgen reads (math::kGgmlTypes' `dequantized`).
std::vector<const math::GgmlTypeTraits*> read_types() {
  std::vector<const math::GgmlTypeTraits*> out;
  for (const math::GgmlTypeTraits& t : math::kGgmlTypes)
    if (t.dequantized) out.push_back(&t);
  return out;
}

std::string message_of(uint32_t type, int64_t rows, int64_t k, size_t bytes) {
  try {
    ggml_dequantize_launch(type, rows, k, bytes);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("ggml_matrix_bytes: rows x whole blocks x the type's bytes, -1 for what cannot be read") {
  CHECK(read_types().size() == 13);
  for (const math::GgmlTypeTraits* t : read_types()) {
    CAPTURE(t->name);
    const auto raw = static_cast<uint32_t>(t->type);
    CHECK(math::ggml_matrix_bytes(raw, 3, 4 * t->block_size) == 3 * 4 * t->type_size);
    CHECK(math::ggml_matrix_bytes(raw, 0, 4 * t->block_size) == 0);
    if (t->block_size > 1) CHECK(math::ggml_matrix_bytes(raw, 3, 4 * t->block_size + 1) == -1);
    CHECK(math::ggml_matrix_bytes(raw, -1, t->block_size) == -1);
    CHECK(math::ggml_matrix_bytes(raw, INT64_MAX / 2, 4 * t->block_size) == -1);  // overflows
  }
  CHECK(math::ggml_matrix_bytes(static_cast<uint32_t>(math::GgmlType::kQ8_1), 1, 32) == -1);  // not read
  CHECK(math::ggml_matrix_bytes(static_cast<uint32_t>(math::GgmlType::kIQ4_XS), 1, 256) == -1);
  CHECK(math::ggml_matrix_bytes(1000, 1, 32) == -1);  // no such type
  // Q4_K: 144 bytes per 256 elements; Q8_0: 34 per 32.
  CHECK(math::ggml_matrix_bytes(static_cast<uint32_t>(math::GgmlType::kQ4_K), 5120, 5120) == 5120LL * 20 * 144);
  CHECK(math::ggml_matrix_bytes(static_cast<uint32_t>(math::GgmlType::kQ8_0), 7, 64) == 7 * 2 * 34);
}

TEST_CASE("ggml dequantize tiles fit static shared memory, and a warp's stores into them hit 32 banks") {
  for (const math::GgmlTypeTraits* t : read_types()) {
    CAPTURE(t->name);
    const int blocks = cuda::ggml_tile_blocks(t->block_size), stride = cuda::ggml_tile_stride(t->block_size);
    CHECK(blocks % 32 == 0);  // whole warps
    CHECK(stride >= t->block_size);
    CHECK(cuda::ggml_tile_bytes(t->block_size) <= cuda::kStaticSharedBytes);
    CHECK(cuda::ggml_tile_bytes(t->block_size) == static_cast<size_t>(blocks) * stride * sizeof(float));
    // Threads 0..31 of a warp each write element l of their own block.
    if (t->block_size > 1)
      for (int l = 0; l < t->block_size; ++l) {
        std::set<int> banks;
        for (int thread = 0; thread < 32; ++thread) banks.insert((thread * stride + l) % 32);
        CHECK(banks.size() == 32);
      }
  }
}

TEST_CASE("ggml dequantize launch: one thread per block, the grid covering every tile up to its cap") {
  const auto q4_k = static_cast<uint32_t>(math::GgmlType::kQ4_K), q8_0 = static_cast<uint32_t>(math::GgmlType::kQ8_0);
  // 7 rows of 3 Q4_K blocks: 21 blocks, one tile of 32.
  cuda::GgmlDequantizeLaunch l = ggml_dequantize_launch(q4_k, 7, 768, 7 * 3 * 144);
  CHECK(l.type == math::GgmlType::kQ4_K);
  CHECK(l.blocks == 21);
  CHECK(l.threads == 32);
  CHECK(l.grid == 1);
  // 1000 rows of 2 Q8_0 blocks: 2000 blocks in tiles of 256, the last partial.
  l = ggml_dequantize_launch(q8_0, 1000, 64, 1000 * 2 * 34);
  CHECK(l.blocks == 2000);
  CHECK(l.threads == 256);
  CHECK(l.grid == 8);
  CHECK(static_cast<int64_t>(l.grid) * l.threads >= l.blocks);
  // A Wan 14B feed-forward matrix in Q4_K: 13824 x 5120, 276480 blocks.
  l = ggml_dequantize_launch(q4_k, 13824, 5120, 13824ULL * 20 * 144);
  CHECK(l.grid == 276480 / 32);
  // More tiles than the cap: the CTAs loop over them.
  l = ggml_dequantize_launch(q8_0, int64_t{1} << 22, 32 * 8, (size_t{1} << 22) * 8 * 34);
  CHECK(l.grid == cuda::kMaxDequantizeCtas);
  // No rows: nothing to launch.
  CHECK(ggml_dequantize_launch(q4_k, 0, 512, 0).grid == 0);
}

TEST_CASE("ggml dequantize launch refuses sizes that do not fit the type, naming it") {
  const auto q4_k = static_cast<uint32_t>(math::GgmlType::kQ4_K);
  CHECK(message_of(q4_k, 2, 512, 2 * 2 * 144 - 1).find("Q4_K") != std::string::npos);   // a byte short
  CHECK(message_of(q4_k, 2, 512, 2 * 2 * 144 + 144).find("576 bytes") != std::string::npos);  // a block too many
  CHECK(message_of(q4_k, 2, 300, 600).find("whole blocks") != std::string::npos);
  CHECK(message_of(static_cast<uint32_t>(math::GgmlType::kQ8_1), 1, 32, 40).find("Q8_1 (not a type ditgen reads)") !=
        std::string::npos);
  CHECK(message_of(77, 1, 32, 40).find("ggml type 77") != std::string::npos);
  CHECK(message_of(q4_k, 2, 512, 576).empty());
}
