// bfloat16 attention on the CPU through oneDNN's matmuls (attention_onednn.cpp
// says the design), beside the tile kernel of attention.cpp, which chooses
// between them (cpu::attention). Arguments as ops::AttentionArgs, already
// checked by the front end and cpu::attention.
#pragma once

#include "ops/ops.h"

namespace ditgen::ops::cpu {

// Whether a bfloat16-compute call runs on oneDNN's matmuls: as the test hook
// (Bf16Hooks::attention) forces, else where oneDNN runs both of the call's
// products with AMX (not its reference loops, nor AVX-512 alone, where the
// tile kernel is as fast) and the head size is a multiple of 32.
bool attention_uses_onednn(const AttentionArgs& a);

// softmax(scale q k^T + bias) v with bfloat16 operands (a.compute), float32
// scores, softmax, sums and output.
void attention_onednn(const AttentionArgs& a);

}  // namespace ditgen::ops::cpu
