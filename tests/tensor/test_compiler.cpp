// Guards against the compiler bug that made CMakeLists.txt keep GCC 12 off
// AVX-512 (and off the 256-bit "by pieces" stores of the Intel AVX-512
// tunings, which do the same without AVX-512): GCC 12.2 built constant
// int64 lists ending in zero as a broadcast of their first element. Shapes
// are such lists.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace {
__attribute__((noinline)) std::vector<int64_t> ones_then_zero() { return {1, 1, 1, 0}; }
__attribute__((noinline)) ditgen::Shape fives_then_zero() { return {5, 5, 5, 0}; }
}  // namespace

TEST_CASE("constant shape lists keep their trailing zero (GCC 12 AVX-512 miscompile)") {
  CHECK(ones_then_zero() == std::vector<int64_t>{1, 1, 1, 0});
  const ditgen::Shape s = fives_then_zero();
  REQUIRE(s.size() == 4);
  CHECK(s[3] == 0);
  CHECK(ditgen::shape_numel(s) == 0);
}

TEST_CASE("tensor views share storage, reshape and slice0 check their bounds") {
  ditgen::Tensor t = ditgen::Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  ditgen::Tensor row = t.slice0(1, 2);
  CHECK(row.shape() == ditgen::Shape{1, 3});
  CHECK(row[0] == 3);
  row[1] = 40;
  CHECK(t[4] == 40);
  CHECK(t.reshape({3, -1}).shape() == ditgen::Shape{3, 2});
  CHECK_THROWS(t.reshape({4, 2}));
  CHECK_THROWS(t.slice0(1, 3));
  CHECK(t.clone().data() != t.data());
}
