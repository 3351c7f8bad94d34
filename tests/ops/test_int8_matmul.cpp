// The CPU's W8A8 linear (ops/cpu/int8_matmul.h) against plain loops: the
// quantizers (round half to even, per-row scales, zero rows) and the layer
// on odd shapes, with and without bias and GELU, into a strided output.
// The reference quantizes with its own loop and sums the integer products
// exactly in int64, so the kernel must give the quantized operands'
// product to float rounding; a second check bounds the quantization error
// itself against the float32 layer (what W8A8 costs in accuracy).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/math/activations.h"
#include "ops/cpu/int8_matmul.h"
#include "test_helpers.h"

using namespace ditgen;

namespace {

// Plain per-row symmetric quantization (the reference's own loop).
void quantize_plain(const std::vector<float>& x, int64_t rows, int64_t k, std::vector<int8_t>& q,
                    std::vector<double>& scales) {
  q.assign(static_cast<size_t>(rows * k), 0);
  scales.assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x[r * k + j]));
    const float s = amax / 127.0f;
    scales[r] = s;
    if (s == 0) continue;
    const float inv = 1.0f / s;
    for (int64_t j = 0; j < k; ++j) q[r * k + j] = static_cast<int8_t>(std::lrint(x[r * k + j] * inv));
  }
}

std::vector<float> random_values(int64_t n, uint32_t seed, float scale = 1.0f) {
  const Tensor t = testing::random_tensor({n}, seed, -scale, scale);
  return std::vector<float>(t.data(), t.data() + n);
}

}  // namespace

TEST_CASE("int8: per-row quantization rounds half to even, scales by max|x|/127, keeps zero rows zero") {
  // 127 / 254 = 0.5 steps: x = s * (k + 0.5) must round to the even neighbour.
  const std::vector<float> x = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int8_t> q(12);
  std::vector<float> s(2);
  ops::cpu::quantize_rows_s8(x.data(), 2, 6, 6, q.data(), s.data());
  CHECK(s[0] == doctest::Approx(1.0f));
  CHECK(q[0] == 127);
  CHECK(q[1] == 0);   // 0.5 -> 0
  CHECK(q[2] == 2);   // 1.5 -> 2
  CHECK(q[3] == 2);   // 2.5 -> 2
  CHECK(q[4] == -2);  // -2.5 -> -2
  CHECK(q[5] == 0);
  CHECK(s[1] == 0.0f);
  for (int j = 6; j < 12; ++j) CHECK(q[j] == 0);
}

TEST_CASE("int8: the linear equals the quantized operands' product (odd shapes, bias, GELU, strided output)") {
  struct Case {
    int64_t m, n, k;
    bool bias;
    ops::Activation act;
    int64_t pad;  // extra columns of the output's rows
  };
  for (const Case c : {Case{1, 7, 5, false, ops::Activation::kNone, 0}, Case{3, 33, 65, true, ops::Activation::kNone, 0},
                       Case{17, 48, 96, true, ops::Activation::kGeluTanh, 5},
                       Case{64, 130, 257, false, ops::Activation::kGeluTanh, 3},
                       // Several output tiles (256 x 512 where the packed layout allows), with
                       // tails in both directions.
                       Case{300, 600, 70, true, ops::Activation::kGeluTanh, 2}}) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const std::vector<float> x = random_values(c.m * c.k, 11 + static_cast<uint32_t>(c.k), 3.0f);
    const std::vector<float> w = random_values(c.n * c.k, 7 + static_cast<uint32_t>(c.n), 0.2f);
    const std::vector<float> b = random_values(c.n, 5, 0.5f);
    // Weights quantized per output channel (what load does), packed.
    std::vector<int8_t> wq;
    std::vector<double> ws;
    quantize_plain(w, c.n, c.k, wq, ws);
    std::vector<float> w_scales(ws.begin(), ws.end());
    std::vector<uint8_t> packed(ops::cpu::packed_weight_bytes_s8(c.n, c.k));
    ops::cpu::pack_weight_s8(c.n, c.k, wq.data(), w_scales.data(), packed.data());
    const int64_t ldy = c.n + c.pad;
    std::vector<float> y(static_cast<size_t>(c.m * ldy), -7.0f);
    ops::cpu::int8_linear(x.data(), c.m, c.k, c.k, packed.data(), c.n, c.bias ? b.data() : nullptr, c.act, y.data(),
                          ldy);
    // Reference: its own quantization of x, exact integer sums.
    std::vector<int8_t> xq;
    std::vector<double> xs;
    quantize_plain(x, c.m, c.k, xq, xs);
    double err = 0, ref_max = 0, err_float = 0, den_float = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t acc = 0;
        double exact = 0;
        for (int64_t t = 0; t < c.k; ++t) {
          acc += static_cast<int64_t>(xq[i * c.k + t]) * wq[j * c.k + t];
          exact += static_cast<double>(x[i * c.k + t]) * w[j * c.k + t];
        }
        double ref = static_cast<double>(acc) * xs[i] * ws[j] + (c.bias ? b[j] : 0.0);
        if (c.bias) exact += b[j];
        if (c.act == ops::Activation::kGeluTanh) {
          ref = math::gelu_tanh(static_cast<float>(ref));
          exact = math::gelu_tanh(static_cast<float>(exact));
        }
        const double got = y[i * ldy + j];
        err = std::max(err, std::fabs(got - ref));
        ref_max = std::max(ref_max, std::fabs(ref));
        err_float += (got - exact) * (got - exact);
        den_float += exact * exact;
      }
    CHECK(err / ref_max < 2e-6);
    // W8A8's own error against the float32 layer: small, not zero.
    const double rel = std::sqrt(err_float / den_float);
    CHECK(rel < 2e-2);
    CHECK(rel > 1e-5);
    // The padding columns are untouched.
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < ldy; ++j) CHECK(y[i * ldy + j] == -7.0f);
  }
}

TEST_CASE("int8: ops::linear and linear_into on a quantize_gemm_weight weight (float32, bfloat16, float16 sources)") {
  const int64_t m = 9, n = 40, k = 72;
  const Tensor x = testing::random_tensor({3, 3, k}, 21, -2.0f, 2.0f);
  const Tensor w = testing::random_tensor({n, k}, 22, -0.3f, 0.3f);
  const Tensor b = testing::random_tensor({n}, 23);
  const Tensor ref = ops::linear(x, w, &b);  // float32
  for (const DType source : {DType::kF32, DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(source));
    const Tensor q = ops::quantize_gemm_weight(w.to(source));
    CHECK(q.layout() == Layout::kInt8Packed);
    CHECK(q.dtype() == DType::kI8);
    CHECK(q.shape() == Shape{n, k});
    CHECK(q.nbytes() == ops::cpu::packed_weight_bytes_s8(n, k));
    CHECK_THROWS_AS(q.clone(), std::logic_error);  // only the GEMM reads it
    const Tensor y = ops::linear(x, q, &b);
    CHECK(y.shape() == Shape{3, 3, n});
    const double rel = testing::rel_l2(y, ref);
    CHECK(rel < 2e-2);
    CHECK(rel > 1e-5);
    // Into columns [5, 5 + n) of a wider output: the same values.
    Tensor wide = Tensor::full({m, n + 8}, -3.0f);
    ops::linear_into(x.reshape({m, k}), q, &b, wide, 5);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) CHECK(wide[i * (n + 8) + 5 + j] == y[i * n + j]);
      CHECK(wide[i * (n + 8)] == -3.0f);
    }
  }
  CHECK_THROWS_AS(ops::quantize_gemm_weight(Tensor::zeros({4}, Device::kCPU)), std::invalid_argument);
}
