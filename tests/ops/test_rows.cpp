// ops/rows.h against plain loops over the element indices: taking a band
// of each sample's rows, joining two bands, repeating samples, and a subset
// of the samples gathered and written back (float32: the CPU's activations;
// copy_rows moves any dtype on CUDA), and the bad arguments.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ops/rows.h"
#include "test_helpers.h"

using namespace ditgen;

namespace {

// Every element equal: x (B, P, D) against ref(b, p, d).
template <class Ref>
void check_rows(const Tensor& x, Ref&& ref) {
  const int64_t b = x.dim(0), p = x.dim(1), d = x.numel() / (b * p > 0 ? b * p : 1);
  int64_t wrong = 0;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t r = 0; r < p; ++r)
      for (int64_t c = 0; c < d; ++c) wrong += x[(i * p + r) * d + c] != ref(i, r, c);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("ops rows: take_rows and join_rows are the per-sample bands, and join undoes take") {
  const Tensor x = testing::random_tensor({3, 7, 5}, 11);
  auto at = [&](int64_t b, int64_t p, int64_t d) { return x[(b * 7 + p) * 5 + d]; };
  const Tensor band = ops::take_rows(x, 2, 4);
  CHECK(band.shape() == Shape{3, 4, 5});
  check_rows(band, [&](int64_t b, int64_t p, int64_t d) { return at(b, 2 + p, d); });
  CHECK(ops::take_rows(x, 7, 0).shape() == Shape{3, 0, 5});

  const Tensor head = ops::take_rows(x, 0, 3), tail = ops::take_rows(x, 3, 4);
  const Tensor joined = ops::join_rows(head, tail);
  CHECK(joined.shape() == x.shape());
  check_rows(joined, at);
  // Either band may be empty.
  check_rows(ops::join_rows(ops::take_rows(x, 0, 0), x), at);
  check_rows(ops::join_rows(x, ops::take_rows(x, 0, 0)), at);
  // 4-D rows: each row is everything past dim 1.
  const Tensor y = testing::random_tensor({2, 4, 3, 2}, 12);
  const Tensor yb = ops::take_rows(y, 1, 2);
  CHECK(yb.shape() == Shape{2, 2, 3, 2});
  check_rows(yb, [&](int64_t b, int64_t p, int64_t d) { return y[(b * 4 + 1 + p) * 6 + d]; });

  CHECK_THROWS_AS(ops::take_rows(x, 5, 3), std::invalid_argument);
  CHECK_THROWS_AS(ops::take_rows(x, -1, 1), std::invalid_argument);
  CHECK_THROWS_AS(ops::join_rows(x, testing::random_tensor({3, 2, 4}, 1)), std::invalid_argument);
  CHECK_THROWS_AS(ops::join_rows(x, testing::random_tensor({2, 2, 5}, 1)), std::invalid_argument);
}

TEST_CASE("ops rows: repeat_rows is repeat_interleave along dim 0") {
  const Tensor x = testing::random_tensor({3, 4}, 21);
  const Tensor r = ops::repeat_rows(x, 5);
  REQUIRE(r.shape() == Shape{15, 4});
  int64_t wrong = 0;
  for (int64_t i = 0; i < 15; ++i)
    for (int64_t c = 0; c < 4; ++c) wrong += r[i * 4 + c] != x[(i / 5) * 4 + c];
  CHECK(wrong == 0);
  CHECK(ops::repeat_rows(x, 1).shape() == x.shape());
  CHECK_THROWS_AS(ops::repeat_rows(x, 0), std::invalid_argument);
}

TEST_CASE("ops rows: sample_rows gathers a subset of the samples and put_sample_rows writes it back") {
  const Tensor x = testing::random_tensor({4 * 3, 2}, 31);  // 4 samples of 3 rows
  const std::vector<int64_t> samples = {2, 0};
  const Tensor some = ops::sample_rows(x, samples, 3);
  REQUIRE(some.shape() == Shape{6, 2});
  int64_t wrong = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    for (int64_t r = 0; r < 3 * 2; ++r) wrong += some[static_cast<int64_t>(i) * 6 + r] != x[samples[i] * 6 + r];
  CHECK(wrong == 0);
  CHECK(ops::sample_rows(x, {}, 3).raw() == x.raw());  // all samples: x itself

  Tensor y = Tensor::zeros({12, 2});
  Tensor changed = some.clone();
  for (int64_t i = 0; i < changed.numel(); ++i) changed[i] += 1.0f;
  ops::put_sample_rows(y, changed, samples, 3);
  wrong = 0;
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t r = 0; r < 6; ++r) {
      const float want = s == 2 ? x[2 * 6 + r] + 1.0f : s == 0 ? x[r] + 1.0f : 0.0f;
      wrong += y[s * 6 + r] != want;
    }
  CHECK(wrong == 0);
}
