// LoRA's arithmetic (lora_delta.h): two GEMMs, or one loop.
#include "ops/lora_delta.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "ops/ops.h"

namespace ditgen::ops {
namespace {

// a (r, in) and b (out, r) of one rank r.
void check_pair(const char* fn, const Tensor& a, const Tensor& b) {
  if (a.ndim() != 2 || b.ndim() != 2 || a.dim(0) != b.dim(1) || a.dim(0) < 1)
    throw std::invalid_argument(std::string(fn) + ": a (r, in) and b (out, r) expected, got " + shape_str(a.shape()) +
                                " and " + shape_str(b.shape()));
}

}  // namespace

void lora_merge_(Tensor& w, const Tensor& a, const Tensor& b, float factor) {
  check_pair("lora_merge_", a, b);
  if (w.ndim() != 2 || w.dim(0) != b.dim(0) || w.dim(1) != a.dim(1))
    throw std::invalid_argument("lora_merge_: weight " + shape_str(w.shape()) + " for a LoRA of " +
                                shape_str({b.dim(0), a.dim(1)}));
  gemm(false, false, factor, b, a, 1.0f, w);
}

void lora_apply_(const Tensor& x, const Tensor& a, const Tensor& b, float factor, Tensor& y) {
  check_pair("lora_apply_", a, b);
  if (x.ndim() < 1 || x.dim(-1) != a.dim(1) || y.ndim() < 1 || y.dim(-1) != b.dim(0) ||
      x.numel() / x.dim(-1) != y.numel() / y.dim(-1))
    throw std::invalid_argument("lora_apply_: x " + shape_str(x.shape()) + ", y " + shape_str(y.shape()) +
                                " for a LoRA of " + shape_str({b.dim(0), a.dim(1)}));
  const int64_t rows = x.numel() / x.dim(-1);
  const Tensor x2 = x.reshape({rows, x.dim(-1)});
  Tensor y2 = y.reshape({rows, y.dim(-1)});
  Tensor xa = Tensor::empty({rows, a.dim(0)}, x.device(), x.dtype());
  gemm(false, true, 1.0f, x2, a, 0.0f, xa);   // (rows, r) = x · A^T
  gemm(false, true, factor, xa, b, 1.0f, y2);  // y += factor · (x A^T) · B^T
}

void lora_add_delta_(Tensor& t, const Tensor& delta, float factor) {
  if (t.shape() != delta.shape())
    throw std::invalid_argument("lora_add_delta_: tensor " + shape_str(t.shape()) + ", delta " +
                                shape_str(delta.shape()));
  float* p = t.data();  // host float32 (std::logic_error otherwise)
  const float* d = delta.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] += factor * d[i];
}

Tensor lora_columns(const Tensor& t, int64_t begin, int64_t count) {
  if (t.ndim() != 2) throw std::invalid_argument("lora_columns: a 2-D tensor expected, got " + shape_str(t.shape()));
  if (begin == 0 && count == t.dim(1)) return t;
  if (begin < 0 || count < 0 || begin + count > t.dim(1))
    throw std::out_of_range("lora_columns: columns [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                            ") of " + shape_str(t.shape()));
  Tensor out = Tensor::empty({t.dim(0), count});
  const float* src = t.data();  // host float32 (std::logic_error otherwise)
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(out.data() + r * count, src + r * t.dim(1) + begin, static_cast<size_t>(count) * sizeof(float));
  return out;
}

}  // namespace ditgen::ops
