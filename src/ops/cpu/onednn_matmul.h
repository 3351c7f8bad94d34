// The CPU's GEMM engine: oneDNN's matmul (Debian's libdnnl, its OpenMP
// build, so it shares ditgen's thread pool), in float32 or in bfloat16 with
// float32 accumulation and output. Chosen by measurement on this project's
// machine (AVX-512 + AVX512-BF16, 2 threads; README, CPU performance):
// float32 at 205-220 GFLOP/s against OpenBLAS sgemm's 175-200 on every
// transformer shape from 64x128x128 to 16384x1152x1152, bfloat16 at 420-440
// GFLOP/s (OpenBLAS 0.3.21 as Debian builds it has no sbgemm). OpenBLAS stays
// for the one-row float32 products (sgemv is faster there).
//
// A weight is read in its plain layout ([N, K] row-major as a checkpoint
// stores it, or [K, N]), used in place from the mmapped file, or, for a
// bfloat16 weight of a transformer, packed once at load into oneDNN's
// blocked layout (onednn_pack_weight below; packing float32 weights gained
// only 2-4% at M = 512, so they stay plain). The bias and the activation
// run inside the matmul on the output tile while it is in cache (oneDNN
// post-ops).
//
// Primitives are built once per distinct call shape (a few hundred
// microseconds each) and cached for the process: a model runs a handful of
// shapes over and over, and after the first denoising step no call builds
// or allocates anything.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/ops.h"
#include "vocab/dtype.h"

namespace ditgen::ops::cpu {

// c[m, n] = act(alpha * op(a)[m, k] · op(b)[k, n] + bias[n] + beta * c),
// row-major with leading dimensions lda, ldb, ldc; op = transpose when asked.
// a and b are `dtype` (float32 or bfloat16), c and bias float32. A bias
// requires alpha == 1.
struct MatmulCall {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  DType dtype = DType::kF32;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  Activation act = Activation::kNone;
  // b is a weight packed by onednn_pack_weight (bfloat16, trans_b, ldb = k)
  // rather than a row-major array.
  bool packed_b = false;
};

// Whether oneDNN runs `dtype` matmuls here with an optimised kernel (not its
// reference loops): float32 always on x86-64, bfloat16 where the CPU has
// AVX-512 (native bf16 dot products with AVX512-BF16 or AMX, emulated on
// plain AVX-512).
bool onednn_fast(DType dtype);

// bfloat16 GEMM weights are packed once, at load, into the blocked layout
// oneDNN's matmul reads fastest (on AVX-512, 16 x 64 tiles of k-pairs),
// instead of being repacked by every call: 7% faster at DiT-XL's shapes,
// 15% at T5-XXL's, 50% for a few rows (the adaLN linears). The layout is
// the one oneDNN prefers for the weight's (n, k) whatever the rows (it does
// not depend on m), asked once per shape.
// Whether an (n, k) bfloat16 weight (row-major [n, k], the b of a trans_b
// GEMM) packs into exactly its own bytes, with a fast kernel to read it.
bool onednn_packs_weight(int64_t n, int64_t k);
// Writes w's n * k elements to `packed` (n * k bfloat16, no overlap) in that
// layout; requires onednn_packs_weight(n, k).
void onednn_pack_weight(int64_t n, int64_t k, const void* w, void* packed);

// The same layout for any bfloat16 b operand (attention's keys and values,
// packed once and multiplied by many query blocks): its size in bytes,
// padding included, and the packing of b, row-major [n, k] when trans_b (a
// weight, keys) or [k, n] otherwise (values), dense rows. The packing runs
// on the calling thread alone inside a parallel region.
size_t onednn_packed_b_bytes(int64_t n, int64_t k);
void onednn_pack_b(int64_t n, int64_t k, bool trans_b, const void* b, void* packed);

// Runs one call (a cached primitive); m, n, k >= 1.
void onednn_matmul(const MatmulCall& call, const void* a, const void* b, const float* bias, float* c);

// The kernel oneDNN chose for a call of this shape ("brg:avx512_core_bf16"),
// for benchmarks and diagnostics.
const char* onednn_kernel_name(const MatmulCall& call);

}  // namespace ditgen::ops::cpu
