// Philox4x32-10 against Random123's published known-answer vectors
// (Random123 tests/kat_vectors, also in TensorFlow's and Random123-Boost's
// tests), and the uniform / Box-Muller helpers.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/math/philox.h"

using namespace ditgen::philox;

namespace {
void check_kat(U32x4 ctr, U32x2 key, U32x4 want) {
  const U32x4 got = philox4x32_10(ctr, key);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(got.v[i] == want.v[i]);
  }
}
}  // namespace

TEST_CASE("Philox4x32-10 known-answer vectors") {
  check_kat({{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}});
  check_kat({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, {{0xffffffff, 0xffffffff}},
            {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}});
  check_kat({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, {{0xa4093822, 0x299f31d0}},
            {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}});
}

TEST_CASE("uniforms stay in range at the extremes") {
  CHECK(uniform_open0_closed1(0) > 0.0f);
  CHECK(uniform_open0_closed1(0xffffffffu) == 1.0f);
  CHECK(uniform_closed0_open1(0) == 0.0f);
  CHECK(uniform_closed0_open1(0xffffffffu) < 1.0f);
  float z0, z1;
  box_muller(0, 0, &z0, &z1);  // the smallest uniform: a large but finite radius
  CHECK(std::isfinite(z0));
  CHECK(z0 > 5.0f);
  CHECK(z1 == 0.0f);
  box_muller(0xffffffffu, 0x12345678u, &z0, &z1);  // u1 = 1: radius 0
  CHECK(z0 == 0.0f);
  CHECK(std::fabs(z1) == 0.0f);
}

TEST_CASE("key and counter layout") {
  const U32x2 k = key_from_seed(0x0123456789abcdefULL);
  CHECK(k.v[0] == 0x89abcdefu);
  CHECK(k.v[1] == 0x01234567u);
  const U32x4 c = counter_from_block(0x100000002ULL, 7);
  CHECK(c.v[0] == 2u);
  CHECK(c.v[1] == 1u);
  CHECK(c.v[2] == 7u);
  CHECK(c.v[3] == 0u);
}
