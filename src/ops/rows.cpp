// Row-block moves: each a few ops::copy_rows (or slice copies), checked
// shapes, on the input's device and dtype.
#include "ops/rows.h"

#include <stdexcept>
#include <string>

#include "ops/ops.h"

namespace ditgen::ops {

namespace {

// Elements per row of dim 1 (a token's width): the product of dims 2...
int64_t row_width(const Tensor& x) {
  int64_t w = 1;
  for (int i = 2; i < x.ndim(); ++i) w *= x.dim(i);
  return w;
}

}  // namespace

Tensor take_rows(const Tensor& x, int64_t first, int64_t count) {
  if (x.ndim() < 2 || first < 0 || count < 0 || first + count > x.dim(1))
    throw std::invalid_argument("take_rows: rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                ") of " + shape_str(x.shape()));
  const int64_t b = x.dim(0), p = x.dim(1), d = row_width(x);
  Shape shape = x.shape();
  shape[1] = count;
  Tensor out = Tensor::empty(shape, x.device(), x.dtype());
  if (count > 0) copy_rows(x, first * d, p * d, out, 0, count * d, b, count * d);
  return out;
}

Tensor join_rows(const Tensor& a, const Tensor& b) {
  Shape rest_a = a.shape(), rest_b = b.shape();
  if (a.ndim() >= 2 && b.ndim() >= 2) rest_a[1] = rest_b[1] = 0;
  if (a.ndim() < 2 || rest_a != rest_b || a.device() != b.device() || a.dtype() != b.dtype())
    throw std::invalid_argument("join_rows: " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
  const int64_t n = b.dim(0), pa = a.dim(1), pb = b.dim(1), d = row_width(b), p = pa + pb;
  Shape shape = b.shape();
  shape[1] = p;
  Tensor out = Tensor::empty(shape, b.device(), b.dtype());
  if (pa > 0) copy_rows(a, 0, pa * d, out, 0, p * d, n, pa * d);
  if (pb > 0) copy_rows(b, 0, pb * d, out, pa * d, p * d, n, pb * d);
  return out;
}

Tensor repeat_rows(const Tensor& x, int64_t times) {
  if (x.ndim() < 1 || times < 1)
    throw std::invalid_argument("repeat_rows: " + shape_str(x.shape()) + " " + std::to_string(times) + " times");
  const int64_t b = x.dim(0), w = b > 0 ? x.numel() / b : 0;
  Shape shape = x.shape();
  shape[0] = b * times;
  Tensor out = Tensor::empty(shape, x.device(), x.dtype());
  if (w > 0)
    for (int64_t r = 0; r < times; ++r) copy_rows(x, 0, w, out, r * w, times * w, b, w);
  return out;
}

Tensor sample_rows(const Tensor& t, const std::vector<int64_t>& samples, int64_t rows_per_sample) {
  if (samples.empty()) return t;
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(samples.size()) * rows_per_sample;
  Tensor out = Tensor::empty(shape, t.device(), t.dtype());
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t s = samples[i], at = static_cast<int64_t>(i);
    out.slice0(at * rows_per_sample, (at + 1) * rows_per_sample)
        .copy_from(t.slice0(s * rows_per_sample, (s + 1) * rows_per_sample));
  }
  return out;
}

void put_sample_rows(Tensor& t, const Tensor& rows, const std::vector<int64_t>& samples, int64_t rows_per_sample) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t s = samples[i], at = static_cast<int64_t>(i);
    t.slice0(s * rows_per_sample, (s + 1) * rows_per_sample)
        .copy_from(rows.slice0(at * rows_per_sample, (at + 1) * rows_per_sample));
  }
}

}  // namespace ditgen::ops
