// Philox4x32-10 counter-based RNG (Salmon, Moraes, Dror, Shaw: "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011) and a Box-Muller transform to
// standard normals, as DITGEN_HD functions shared by the CPU noise generator
// and CUDA kernels.
//
// A counter-based generator is a pure function (counter, key) -> 4 random
// words: any element of any image can be drawn independently, in any order, on
// any thread or rank, which is what makes the noise identical whatever the
// batch size or parallel layout (docs/design.md §2, `seed`). The constants and
// round structure are Random123's / cuRAND's, so the published known-answer
// vectors check this implementation.
//
// Normals are float32. The uniform -> normal step uses logf/cosf/sinf, so CPU
// and GPU agree to a few ulp, not bit for bit (their libm differ); the raw
// Philox words are identical everywhere.
#pragma once
#include <cstdint>
#include <math.h>

#include "kernels/math/hd.h"

namespace ditgen::philox {

struct U32x4 {
  uint32_t v[4];
};
struct U32x2 {
  uint32_t v[2];
};
struct F32x4 {
  float v[4];
};

constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3)-1)
constexpr uint32_t kW1 = 0xBB67AE85u;

DITGEN_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

DITGEN_HD U32x4 philox_round(U32x4 c, U32x2 k) {
  uint32_t hi0, hi1;
  const uint32_t lo0 = mulhilo(kM0, c.v[0], &hi0);
  const uint32_t lo1 = mulhilo(kM1, c.v[2], &hi1);
  return U32x4{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}

// Philox4x32 with 10 rounds, the key bumped between rounds.
DITGEN_HD U32x4 philox4x32_10(U32x4 counter, U32x2 key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key.v[0] += kW0;
      key.v[1] += kW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

// Uniform in (0, 1]: the top 24 bits (exactly representable in float32, so
// the conversion is exact on every device), shifted by one so log() never
// sees 0.
DITGEN_HD float uniform_open0_closed1(uint32_t x) {
  return static_cast<float>((x >> 8) + 1u) * (1.0f / 16777216.0f);
}

// Uniform in [0, 1) from the top 24 bits (the Box-Muller angle).
DITGEN_HD float uniform_closed0_open1(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// Box-Muller: two uniform words -> two independent standard normals.
DITGEN_HD void box_muller(uint32_t a, uint32_t b, float* z0, float* z1) {
  const float r = sqrtf(-2.0f * logf(uniform_open0_closed1(a)));
  const float theta = 6.2831853071795864769f * uniform_closed0_open1(b);
  *z0 = r * cosf(theta);
  *z1 = r * sinf(theta);
}

// Four standard normals for one (counter, key): words (0,1) give normals 0 and
// 1, words (2,3) give normals 2 and 3.
DITGEN_HD F32x4 normal4(U32x4 counter, U32x2 key) {
  const U32x4 w = philox4x32_10(counter, key);
  F32x4 z;
  box_muller(w.v[0], w.v[1], &z.v[0], &z.v[1]);
  box_muller(w.v[2], w.v[3], &z.v[2], &z.v[3]);
  return z;
}

// The counter / key layout ditgen's noise uses: a 64-bit seed is the key, a
// 64-bit block index is counter words 0-1, and counter word 2 is a stream id
// (0 for the initial latent noise) so other noise uses never collide with it.
DITGEN_HD U32x2 key_from_seed(uint64_t seed) {
  return U32x2{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
}
DITGEN_HD U32x4 counter_from_block(uint64_t block, uint32_t stream) {
  return U32x4{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), stream, 0u}};
}

}  // namespace ditgen::philox
