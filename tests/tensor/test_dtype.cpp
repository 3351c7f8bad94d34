// Typed CPU tensors: storage of the five dtypes, the checked typed accessors,
// and conversion. The 16-bit conversions are checked against bit patterns
// worked out by hand (round half to even, NaN, inf, overflow, subnormals),
// against a reference computed another way (float16: GCC's _Float16, whose
// conversions are correctly rounded; bfloat16: the nearest of the two
// candidate patterns chosen in double arithmetic), and by round trips over
// every 16-bit pattern.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "tensor/half.h"
#include "tensor/tensor.h"

using namespace ditgen;

namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Nearest bfloat16 by distance in double, ties to the even pattern.
uint16_t bf16_reference(float x) {
  if (std::isnan(x)) return 0x7fc0;
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
  if ((u & 0xffffu) == 0) return lo;
  const double dlo = std::fabs(static_cast<double>(x) - bf16_to_f32(lo));
  // hi may be inf (0x7f80 / 0xff80): it is the nearest when x is at or past the midpoint to 2^128.
  const double hv = (hi & 0x7fffu) == 0x7f80u ? std::copysign(0x1p128, x) : static_cast<double>(bf16_to_f32(hi));
  const double dhi = std::fabs(static_cast<double>(x) - hv);
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

}  // namespace

TEST_CASE("dtype sizes and names") {
  CHECK(dtype_size(DType::kF32) == 4);
  CHECK(dtype_size(DType::kBF16) == 2);
  CHECK(dtype_size(DType::kF16) == 2);
  CHECK(dtype_size(DType::kI32) == 4);
  CHECK(dtype_size(DType::kI64) == 8);
  CHECK(std::string(dtype_name(DType::kI32)) == "int32");
  CHECK(std::string(dtype_name(DType::kI64)) == "int64");
  CHECK(is_floating(DType::kBF16));
  CHECK_FALSE(is_floating(DType::kI64));
}

TEST_CASE("float32 to bfloat16 rounds to nearest even, as torch") {
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(-2.0f) == 0xC000);
  CHECK(f32_to_bf16(-0.0f) == 0x8000);
  CHECK(f32_to_bf16(from_bits(0x3F808000)) == 0x3F80);  // halfway, even below
  CHECK(f32_to_bf16(from_bits(0x3F818000)) == 0x3F82);  // halfway, even above
  CHECK(f32_to_bf16(from_bits(0x3F808001)) == 0x3F81);  // just past halfway
  CHECK(f32_to_bf16(from_bits(0x3F807FFF)) == 0x3F80);  // just below
  CHECK(f32_to_bf16(3.14159265f) == 0x4049);
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  CHECK(f32_to_bf16(-std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  CHECK(f32_to_bf16(from_bits(0x7F800001)) == 0x7FC0);  // a signalling NaN stays a NaN
  CHECK(f32_to_bf16(from_bits(0x00008000)) == 0x0000);  // float subnormals round like the rest
  CHECK(f32_to_bf16(from_bits(0x00018000)) == 0x0002);

  std::mt19937 gen(1);
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(gen());
    CAPTURE(std::bit_cast<uint32_t>(x));
    REQUIRE(f32_to_bf16(x) == bf16_reference(x));
  }
}

TEST_CASE("float32 to float16 rounds to nearest even, as torch") {
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(-2.0f) == 0xC000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(0.1f) == 0x2E66);
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);              // halfway, even below
  CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02);          // halfway, even above
  CHECK(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);   // just past halfway
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65519.996f) == 0x7BFF);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);  // halfway to 65536: even is inf
  CHECK(f32_to_f16(-1e6f) == 0xFC00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) == 0x7E00);
  CHECK(f32_to_f16(-std::numeric_limits<float>::quiet_NaN()) == 0xFE00);
  CHECK(f32_to_f16(0x1p-14f) == 0x0400);                    // smallest normal
  CHECK(f32_to_f16(1023 * 0x1p-24f) == 0x03FF);             // largest subnormal
  CHECK(f32_to_f16(1023.5f * 0x1p-24f) == 0x0400);          // halfway: rounds into the normals
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);                    // halfway to the smallest subnormal: even is 0
  CHECK(f32_to_f16(from_bits(0x33000001)) == 0x0001);       // just past it
  CHECK(f32_to_f16(3 * 0x1p-25f) == 0x0002);                // 1.5 ulp: even is 2
  CHECK(f32_to_f16(-0x1p-26f) == 0x8000);
  CHECK(f32_to_f16(1e-30f) == 0x0000);

#if defined(__FLT16_MAX__)
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> exponent(-28.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    // Magnitudes from below the subnormals to past the overflow, random bits.
    const float x = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(gen)) * from_bits(0x3F800000u | (gen() & 0x7FFFFFu));
    const _Float16 ref = static_cast<_Float16>(x);
    CAPTURE(x);
    REQUIRE(f32_to_f16(x) == std::bit_cast<uint16_t>(ref));
  }
#endif
}

TEST_CASE("every bfloat16 and float16 pattern widens exactly and narrows back to itself") {
  for (uint32_t p = 0; p < 65536; ++p) {
    const uint16_t h = static_cast<uint16_t>(p);
    CAPTURE(p);
    const float b = bf16_to_f32(h), f = f16_to_f32(h);
    if (std::isnan(b))
      REQUIRE(f32_to_bf16(b) == 0x7FC0);
    else
      REQUIRE(f32_to_bf16(b) == h);
    if (std::isnan(f))
      REQUIRE(f32_to_f16(f) == ((h & 0x8000u) | 0x7E00u));
    else
      REQUIRE(f32_to_f16(f) == h);
  }
  CHECK(f16_to_f32(0x0001) == 0x1p-24f);
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(bf16_to_f32(0x4049) == 3.140625f);
}

TEST_CASE("CPU tensors of every dtype, read through checked typed accessors") {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    CAPTURE(dtype_name(t));
    const Tensor z = Tensor::zeros({3, 5}, Device::kCPU, t);
    CHECK(z.dtype() == t);
    CHECK(z.nbytes() == 15 * dtype_size(t));
    CHECK(reinterpret_cast<uintptr_t>(z.raw()) % 64 == 0);
    CHECK(z.to(DType::kF32).to_vector() == std::vector<float>(15, 0.0f));
  }
  Tensor b = Tensor::empty({4}, Device::kCPU, DType::kBF16);
  b.data_as<BFloat16>()[2].bits = 0x4049;
  CHECK(b.to_vector()[2] == 3.140625f);
  CHECK_THROWS_AS(b.data(), std::logic_error);            // data() is float32 only
  CHECK_THROWS_AS(b.data_as<Float16>(), std::logic_error);  // same size, other format
  CHECK_THROWS_AS(b.data_as<float>(), std::logic_error);
  const Tensor& cb = b;
  CHECK(cb.data_as<BFloat16>() == b.data_as<BFloat16>());
  const Tensor f = Tensor::full({2}, 1.0f);
  CHECK(f.data_as<float>() == f.data());
  CHECK_THROWS_AS(f.data_as<int32_t>(), std::logic_error);
  // Views keep the dtype and step by its size.
  CHECK(b.slice0(1, 3).raw() == static_cast<char*>(b.raw()) + 2);
  CHECK(b.slice0(1, 3).dtype() == DType::kBF16);
  // CUDA tensors are floating whatever the build.
  CHECK_THROWS_AS(Tensor::empty({2}, Device::kCUDA, DType::kI64), std::invalid_argument);
}

TEST_CASE("borrow takes a dtype and refuses misaligned storage") {
  alignas(8) static int64_t storage[4] = {1, -2, 3, 1ll << 40};
  const Tensor t = Tensor::borrow(storage, DType::kI64, {2, 2}, nullptr);
  CHECK(t.dtype() == DType::kI64);
  CHECK(t.raw() == storage);
  CHECK(t.data_as<int64_t>()[3] == 1ll << 40);
  CHECK_THROWS_AS(Tensor::borrow(reinterpret_cast<char*>(storage) + 2, DType::kI32, {1}, nullptr),
                  std::invalid_argument);
  CHECK(Tensor::borrow(reinterpret_cast<char*>(storage) + 2, DType::kBF16, {1}, nullptr).dtype() == DType::kBF16);
}

TEST_CASE("to() and copy_from convert between dtypes on the CPU") {
  const std::vector<float> v = {1.0f, from_bits(0x3F808000), from_bits(0x3F818000), -0.0f, 65520.0f, 0x1p-25f,
                                std::numeric_limits<float>::infinity()};
  const Tensor x = Tensor::from_vector({7}, v);
  CHECK(x.to(DType::kF32).raw() == x.raw());  // already float32: shared
  const Tensor b = x.to(DType::kBF16), h = x.to(DType::kF16);
  CHECK(b.dtype() == DType::kBF16);
  for (int i = 0; i < 7; ++i) {
    CHECK(b.data_as<BFloat16>()[i].bits == f32_to_bf16(v[i]));
    CHECK(h.data_as<Float16>()[i].bits == f32_to_f16(v[i]));
  }
  CHECK(b.data_as<BFloat16>()[1].bits == 0x3F80);
  CHECK(h.data_as<Float16>()[4].bits == 0x7C00);
  // 16-bit -> float32 is exact; bfloat16 <-> float16 goes through float32.
  const std::vector<float> back = b.to_vector();
  for (int i = 0; i < 7; ++i) CHECK(std::bit_cast<uint32_t>(back[i]) == uint32_t{b.data_as<BFloat16>()[i].bits} << 16);
  const Tensor hb = h.to(DType::kBF16);
  CHECK(hb.data_as<BFloat16>()[0].bits == 0x3F80);
  Tensor into = Tensor::zeros({7}, Device::kCPU, DType::kF16);
  into.copy_from(b);
  for (int i = 0; i < 7; ++i)
    CHECK(into.data_as<Float16>()[i].bits == f32_to_f16(bf16_to_f32(b.data_as<BFloat16>()[i].bits)));
}

TEST_CASE("integers and floats convert by exact casts, refusing values that do not fit") {
  Tensor l = Tensor::empty({4}, Device::kCPU, DType::kI64);
  int64_t* p = l.data_as<int64_t>();
  p[0] = -3, p[1] = 0, p[2] = 1 << 24, p[3] = 1000;
  CHECK(l.to(DType::kF32).to_vector() == std::vector<float>{-3, 0, 16777216, 1000});
  const Tensor i = l.to(DType::kI32);
  CHECK(i.data_as<int32_t>()[0] == -3);
  CHECK(i.data_as<int32_t>()[2] == 1 << 24);
  CHECK(Tensor::from_vector({2}, {7.0f, -2.0f}).to(DType::kI64).data_as<int64_t>()[1] == -2);
  CHECK(l.to(DType::kBF16).to_vector()[3] == 1000.0f);  // 1000 = 0x447A: exact in bfloat16

  p[3] = (1 << 24) + 1;  // not a float32
  CHECK_THROWS_AS(l.to(DType::kF32), std::invalid_argument);
  p[3] = 1001;  // not a bfloat16 (8-bit significand)
  CHECK_THROWS_AS(l.to(DType::kBF16), std::invalid_argument);
  p[3] = int64_t{1} << 40;
  CHECK_THROWS_AS(l.to(DType::kI32), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector({1}, {0.5f}).to(DType::kI32), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector({1}, {3e9f}).to(DType::kI32), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector({1}, {std::nanf("")}).to(DType::kI64), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector({1}, {0x1p63f}).to(DType::kI64), std::invalid_argument);
}
