// Rotary position embedding (ops::rotary_tables_3d, rotary_embed_,
// rotary_embed, rotary_embed_rows_) against plain loops written from
// diffusers' formulas: the tables per axis in double (angle = position *
// theta^(-2j/d), each value repeated for its pair of channels, axes t | h |
// w), and the interleaved rotation (x[2i] cos - x[2i+1] sin, x[2i] sin +
// x[2i+1] cos) in double. Odd token counts, odd head counts, batch > 1, a
// shard that starts past the first token, rows inside a packed q|k|v buffer.
// tests/ops/test_wan_fixtures.cpp checks the same ops against diffusers'
// own modules.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/math/rotary.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::max_rel;
using ditgen::testing::random_tensor;
using ditgen::testing::rel_l2;

namespace {

// cos or sin of the table row of token (f, y, x), channel c, in double.
double table_value(bool sine, const std::array<int64_t, 3>& dims, int64_t f, int64_t y, int64_t x, int64_t c,
                   double theta) {
  const int64_t pos[3] = {f, y, x};
  int64_t axis = 0;
  while (c >= dims[axis]) c -= dims[axis++];
  const double freq = 1.0 / std::pow(theta, static_cast<double>(2 * (c / 2)) / static_cast<double>(dims[axis]));
  const double angle = static_cast<double>(pos[axis]) * freq;
  return sine ? std::sin(angle) : std::cos(angle);
}

// The rotation of x [rows of width] by the tables' rows first + (r % tokens),
// in double, diffusers' indexing (cos at the even channel, sin at the odd).
std::vector<double> rotated(const Tensor& x, int64_t tokens, int64_t width, const Tensor& cos, const Tensor& sin,
                            int64_t first) {
  const int64_t rows = x.numel() / width, hd = cos.dim(1);
  std::vector<double> out(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = first + r % tokens;
    for (int64_t c = 0; c < width; c += 2) {
      const double x1 = x[r * width + c], x2 = x[r * width + c + 1];
      const double co = cos[t * hd + c % hd], si = sin[t * hd + c % hd + 1];
      out[r * width + c] = x1 * co - x2 * si;
      out[r * width + c + 1] = x1 * si + x2 * co;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("rotary_split_3d splits head_dim as WanRotaryPosEmbed: h = w = 2 * (head_dim / 6), t the rest") {
  CHECK(ops::rotary_split_3d(128) == std::array<int64_t, 3>{44, 42, 42});  // Wan 2.1 / 2.2
  CHECK(ops::rotary_split_3d(44) == std::array<int64_t, 3>{16, 14, 14});
  CHECK(ops::rotary_split_3d(64) == std::array<int64_t, 3>{24, 20, 20});
  CHECK(ops::rotary_split_3d(4) == std::array<int64_t, 3>{4, 0, 0});
  CHECK_THROWS_AS(ops::rotary_split_3d(0), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_split_3d(127), std::invalid_argument);
}

TEST_CASE("rotary_tables_3d: per-axis angles in double, pairs repeated, axes t | h | w, grid order (f, y, x)") {
  struct Case {
    std::array<int64_t, 3> dims, grid;
    double theta;
  };
  for (const Case& k : {Case{{44, 42, 42}, {3, 5, 7}, 10000.0}, Case{{16, 14, 14}, {1, 1, 1}, 10000.0},
                        Case{{8, 0, 6}, {2, 4, 3}, 500.0}, Case{{2, 2, 2}, {5, 1, 3}, 10000.0}}) {
    CAPTURE(k.dims[0]);
    CAPTURE(k.dims[1]);
    CAPTURE(k.grid[0]);
    const ops::RotaryTables t = ops::rotary_tables_3d(k.dims, k.grid, k.theta);
    const int64_t hd = k.dims[0] + k.dims[1] + k.dims[2], n = k.grid[0] * k.grid[1] * k.grid[2];
    REQUIRE(t.cos.shape() == Shape{n, hd});
    REQUIRE(t.sin.shape() == Shape{n, hd});
    std::vector<double> rc(n * hd), rs(n * hd);
    for (int64_t f = 0; f < k.grid[0]; ++f)
      for (int64_t y = 0; y < k.grid[1]; ++y)
        for (int64_t x = 0; x < k.grid[2]; ++x)
          for (int64_t c = 0; c < hd; ++c) {
            const int64_t r = (f * k.grid[1] + y) * k.grid[2] + x;
            rc[r * hd + c] = table_value(false, k.dims, f, y, x, c, k.theta);
            rs[r * hd + c] = table_value(true, k.dims, f, y, x, c, k.theta);
          }
    double worst = 0;
    for (int64_t i = 0; i < n * hd; ++i)
      worst = std::max({worst, std::fabs(t.cos[i] - rc[i]), std::fabs(t.sin[i] - rs[i])});
    CAPTURE(worst);
    CHECK(worst < 1e-7);  // one float rounding of a value in [-1, 1]: < 6e-8
  }
}

TEST_CASE("rotary_tables_3d at large positions (Wan 720p: 21 x 45 x 80 latent patches) stays one rounding away") {
  // Only the last rows are compared (the table is 75600 x 128).
  const std::array<int64_t, 3> dims{44, 42, 42}, grid{21, 45, 80};
  const ops::RotaryTables t = ops::rotary_tables_3d(dims, grid, 10000.0);
  const int64_t n = 21 * 45 * 80;
  REQUIRE(t.cos.shape() == Shape{n, 128});
  double worst = 0;
  for (int64_t r = n - 97; r < n; ++r)
    for (int64_t c = 0; c < 128; ++c) {
      const int64_t f = r / (45 * 80), y = (r / 80) % 45, x = r % 80;
      worst = std::max({worst, std::fabs(t.cos[r * 128 + c] - table_value(false, dims, f, y, x, c, 1e4)),
                        std::fabs(t.sin[r * 128 + c] - table_value(true, dims, f, y, x, c, 1e4))});
    }
  CAPTURE(worst);
  CHECK(worst < 1e-7);
}

TEST_CASE("rotary_embed_ and rotary_embed rotate interleaved pairs: [B, S, H*Dh], [B, S, H, Dh], [S, W]") {
  struct Case {
    int64_t batch, tokens, heads, head_dim, first;
  };
  for (const Case& k : {Case{2, 31, 3, 22, 0}, Case{1, 7, 5, 128, 0}, Case{3, 13, 1, 44, 17}, Case{2, 1, 2, 2, 4}}) {
    CAPTURE(k.batch);
    CAPTURE(k.tokens);
    CAPTURE(k.heads);
    CAPTURE(k.head_dim);
    CAPTURE(k.first);
    // Random tables (not only real rotations): the op must read cos at the
    // even channel and sin at the odd one, whatever the values.
    const int64_t table_rows = k.first + k.tokens + 3, w = k.heads * k.head_dim;
    const Tensor cos = random_tensor({table_rows, k.head_dim}, 1), sin = random_tensor({table_rows, k.head_dim}, 2);
    const Tensor x = random_tensor({k.batch, k.tokens, w}, 3, -4, 4);
    const std::vector<double> ref = rotated(x, k.tokens, w, cos, sin, k.first);

    const Tensor y = ops::rotary_embed(x, cos, sin, k.first);
    CHECK(y.shape() == x.shape());
    CHECK(rel_l2(y, ref) < 1e-6);

    Tensor z = x.clone();
    ops::rotary_embed_(z, cos, sin, k.first);
    CHECK(std::memcmp(z.raw(), y.raw(), y.nbytes()) == 0);  // in place: the same bits

    Tensor z4 = x.clone().reshape({k.batch, k.tokens, k.heads, k.head_dim});
    ops::rotary_embed_(z4, cos, sin, k.first);
    CHECK(std::memcmp(z4.raw(), y.raw(), y.nbytes()) == 0);

    if (k.batch == 1) {
      Tensor z2 = x.clone().reshape({k.tokens, w});
      ops::rotary_embed_(z2, cos, sin, k.first);
      CHECK(std::memcmp(z2.raw(), y.raw(), y.nbytes()) == 0);
    }
  }
}

TEST_CASE("rotary with real tables is a rotation: norms of each pair kept, position 0 unchanged") {
  const ops::RotaryTables t = ops::rotary_tables_3d(ops::rotary_split_3d(24), {2, 3, 3}, 10000.0);
  const Tensor x = random_tensor({2, 18, 48}, 4);
  const Tensor y = ops::rotary_embed(x, t.cos, t.sin);
  for (int64_t r = 0; r < 36; ++r)
    for (int64_t c = 0; c < 48; c += 2) {
      const double n0 = std::hypot(x[r * 48 + c], x[r * 48 + c + 1]), n1 = std::hypot(y[r * 48 + c], y[r * 48 + c + 1]);
      CHECK(n1 == doctest::Approx(n0).epsilon(1e-6));
      if (r % 18 == 0) CHECK(y[r * 48 + c] == x[r * 48 + c]);  // token (0, 0, 0): angle 0
    }
}

TEST_CASE("rotary_embed_rows_ rotates q and k inside packed q|k|v rows and nothing else") {
  const int64_t b = 2, s = 9, heads = 3, hd = 10, w = heads * hd, first = 5;
  const Tensor cos = random_tensor({first + s, hd}, 5), sin = random_tensor({first + s, hd}, 6);
  const Tensor qkv = random_tensor({b, s, 3 * w}, 7);
  Tensor got = qkv.clone();
  ops::rotary_embed_rows_(got, 0, 3 * w, b, s, w, cos, sin, first);  // q
  ops::rotary_embed_rows_(got, w, 3 * w, b, s, w, cos, sin, first);  // k
  for (int part = 0; part < 3; ++part) {
    Tensor sub = Tensor::empty({b, s, w}), ref_in = Tensor::empty({b, s, w});
    for (int64_t r = 0; r < b * s; ++r)
      for (int64_t c = 0; c < w; ++c) {
        sub[r * w + c] = got[r * 3 * w + part * w + c];
        ref_in[r * w + c] = qkv[r * 3 * w + part * w + c];
      }
    CAPTURE(part);
    if (part < 2)
      CHECK(rel_l2(sub, rotated(ref_in, s, w, cos, sin, first)) < 1e-6);
    else
      CHECK(std::memcmp(sub.raw(), ref_in.raw(), sub.nbytes()) == 0);  // v untouched
  }
}

TEST_CASE("rotary ops check their tables and rows") {
  const Tensor cos = Tensor::zeros({8, 6}), sin = Tensor::zeros({8, 6});
  Tensor x = Tensor::zeros({2, 5, 12});
  CHECK_NOTHROW(ops::rotary_embed_(x, cos, sin, 3));
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos, sin, 4), std::invalid_argument);  // rows 4..8 past the table
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos, sin, -1), std::invalid_argument);
  Tensor odd = Tensor::zeros({2, 5, 9});
  CHECK_THROWS_AS(ops::rotary_embed_(odd, cos, sin), std::invalid_argument);  // 9 channels: not heads of 6
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos, Tensor::zeros({8, 4})), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_embed_(x, Tensor::zeros({8, 5}), Tensor::zeros({8, 5})), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos.to(DType::kBF16), sin.to(DType::kBF16)), std::invalid_argument);
  Tensor x4 = Tensor::zeros({2, 5, 2, 5});  // [B, S, H, Dh] with Dh = 5, not the tables' 6
  CHECK_THROWS_AS(ops::rotary_embed_(x4, cos, sin), std::invalid_argument);
  Tensor h = Tensor::zeros({2, 5, 12}, Device::kCPU, DType::kBF16);  // the CPU computes in float32
  CHECK_THROWS_AS(ops::rotary_embed_(h, cos, sin), std::invalid_argument);
  // Rows outside the buffer.
  Tensor packed = Tensor::zeros({2, 5, 36});
  CHECK_NOTHROW(ops::rotary_embed_rows_(packed, 24, 36, 2, 5, 12, cos, sin));
  CHECK_THROWS_AS(ops::rotary_embed_rows_(packed, 25, 36, 2, 5, 12, cos, sin), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_embed_rows_(packed, 0, 11, 2, 5, 12, cos, sin), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_tables_3d({3, 2, 2}, {1, 1, 1}), std::invalid_argument);  // odd axis
  CHECK_THROWS_AS(ops::rotary_tables_3d({0, 0, 0}, {1, 1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_tables_3d({4, 2, 2}, {1, -1, 1}), std::invalid_argument);
}

TEST_CASE("the shared rotary math: (x1 c - x2 s, x1 s + x2 c) and theta^(-2j/d) in float64") {
  float y1 = 0, y2 = 0;
  math::rotary_rotate(3.0f, 5.0f, 0.5f, 0.25f, y1, y2);
  CHECK(y1 == 3.0f * 0.5f - 5.0f * 0.25f);
  CHECK(y2 == 3.0f * 0.25f + 5.0f * 0.5f);
  CHECK(math::rotary_inv_freq(0, 44, 10000.0) == 1.0);
  CHECK(math::rotary_inv_freq(3, 44, 10000.0) == doctest::Approx(std::pow(10000.0, -6.0 / 44.0)).epsilon(1e-15));
}
