// The K-quant quantizers (io/ggml_kquants.h), which have no gguf-py
// reference: quantized, then dequantized by the gguf-py-exact decoders
// (tests/io/test_ggml_blocks.cpp proves them), their error on llama.cpp's
// own test signal stays under llama.cpp's bounds for the reference
// quantizers (tests/test-quantize-fns.cpp: 0.1 + 2 cos(i), error
// sqrt(sum d^2) / n, Q2_K 0.0075, Q3_K 0.0040, Q4_K .. Q6_K 0.002); on
// weight-like Gaussian rows more bits give less error, each K type beats
// the legacy type of its size, and degenerate blocks (zeros, constants,
// outliers, tiny values) decode finite and close.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "io/ggml_quants.h"

using namespace ditgen;
using namespace ditgen::io;

namespace {

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  uint64_t bytes = 0;
  REQUIRE(ggml_bytes(type, x.size(), bytes));
  std::vector<uint8_t> q(bytes);
  quantize(type, x.data(), static_cast<int64_t>(x.size()), q.data());
  std::vector<float> y(x.size());
  dequantize(type, q.data(), 0, static_cast<int64_t>(x.size()), y.data());
  return y;
}

// llama.cpp's measure (test-quantize-fns.cpp: array_rmse): sqrt(sum d^2) / n.
double llama_error(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum) / static_cast<double>(a.size());
}

double relative_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(a[i]) * a[i];
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("ggml K-quants: the round-trip error on llama.cpp's test signal is within llama.cpp's bounds") {
  std::vector<float> x(32 * 128);  // test-quantize-fns.cpp: test_size = 32 * 128, generate_data(0.0)
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(0.1 + 2 * std::cos(static_cast<float>(i)));
  const std::pair<GgmlType, double> cases[] = {{GgmlType::kQ2_K, 0.0075}, {GgmlType::kQ3_K, 0.0040},
                                               {GgmlType::kQ4_K, 0.002},  {GgmlType::kQ5_K, 0.002},
                                               {GgmlType::kQ6_K, 0.002}};
  for (auto [type, bound] : cases) {
    const double error = llama_error(x, round_trip(type, x));
    MESSAGE(std::string(math::ggml_traits(type).name) << ": " << error << " (llama.cpp's bound " << bound << ")");
    CHECK(error < bound);
  }
}

TEST_CASE("ggml K-quants: on Gaussian weights, more bits less error, and each beats the legacy type of its size") {
  std::mt19937 rng(44);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  double previous = 1.0;
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const double e = relative_rmse(x, round_trip(type, x));
    MESSAGE(std::string(math::ggml_traits(type).name) << ": relative RMSE " << e);
    CHECK(e < previous);
    previous = e;
  }
  // ~4.5 bits per weight each; ~5.5; ~6.5 against 8.5 (Q8_0)
  CHECK(relative_rmse(x, round_trip(GgmlType::kQ4_K, x)) < relative_rmse(x, round_trip(GgmlType::kQ4_0, x)));
  CHECK(relative_rmse(x, round_trip(GgmlType::kQ5_K, x)) < relative_rmse(x, round_trip(GgmlType::kQ5_0, x)));
  CHECK(relative_rmse(x, round_trip(GgmlType::kQ6_K, x)) < 0.02);
  CHECK(relative_rmse(x, round_trip(GgmlType::kQ4_K, x)) < 0.1);
}

TEST_CASE("ggml K-quants: zero, constant, outlier and tiny blocks decode finite and close") {
  std::vector<float> x(256 * 5, 0.0f);
  for (int i = 256; i < 512; ++i) x[i] = 0.75f;                              // constant
  for (int i = 512; i < 768; ++i) x[i] = 0.01f * static_cast<float>(i % 7 - 3);  // small, with one outlier
  x[600] = 50.0f;
  for (int i = 768; i < 1024; ++i) x[i] = 1e-30f * static_cast<float>(i % 5);  // below float16's range
  for (int i = 1024; i < 1280; ++i) x[i] = -0.5f - 0.001f * static_cast<float>(i % 3);  // all negative
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    CAPTURE(std::string(math::ggml_traits(type).name));
    const std::vector<float> y = round_trip(type, x);
    for (float v : y) REQUIRE(std::isfinite(v));
    for (int i = 0; i < 256; ++i) CHECK(y[i] == 0.0f);                       // zeros stay zero
    for (int i = 768; i < 1024; ++i) CHECK(std::fabs(y[i]) < 1e-6f);         // tiny values stay tiny
    CHECK(std::fabs(y[600] - 50.0f) < 50.0f * 0.15f);                        // the outlier survives
    double worst = 0;
    for (int i = 256; i < 512; ++i) worst = std::max(worst, std::fabs(double(y[i]) - 0.75));
    CHECK(worst < 0.75 * 0.15);
    for (int i = 1024; i < 1280; ++i) CHECK(std::fabs(y[i] + 0.5f) < 0.1f);
  }
}
