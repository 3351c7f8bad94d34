// The K-quant quantizers (Q2_K .. Q6_K, one 256-element super-block at a
// time), written after the algorithm of ggml's reference quantizers
// (ggml-quants.c: quantize_row_q*_K_ref, the search helpers make_qx_quants,
// make_q3_quants and make_qkx2_quants): per 16- or 32-element sub-block a
// scale (and a minimum) found by a small search over candidate scales
// minimising a weighted error, the sub-block scales quantized to 4, 6 or 8
// bits against the super-block's float16 d (and dmin), then every value
// re-quantized against its decoded scale. Private to io/ggml_quants.cpp,
// which dispatches to them; compiled without floating-point contraction.
//
// gguf-py has no K-quant quantizer, so there is no numpy reference to be
// bit-identical to; tests/io/test_ggml_kquants.cpp checks the round trip
// through the gguf-py-exact dequantizers against llama.cpp's error bounds
// (tests/test-quantize-fns.cpp).
#pragma once
#include <cstdint>

namespace ditgen::io::kquants {

// 256 floats at `x` into one block at `b` (84, 110, 144, 176 or 210 bytes).
void quantize_block_q2_k(const float* x, uint8_t* b);
void quantize_block_q3_k(const float* x, uint8_t* b);
void quantize_block_q4_k(const float* x, uint8_t* b);
void quantize_block_q5_k(const float* x, uint8_t* b);
void quantize_block_q6_k(const float* x, uint8_t* b);

}  // namespace ditgen::io::kquants
