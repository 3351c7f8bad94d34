#include "ops/attention_operands.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ditgen::ops {

TokenRows rows_of(const Tensor& x, int64_t col) {
  if (x.ndim() != 3) throw std::invalid_argument("rows_of: expected a (B, N, C) tensor, got " + shape_str(x.shape()));
  return {&x, col, x.dim(2), x.dim(1)};
}

TokenRows rows_of(const Tensor& x, int64_t col, int64_t row_stride, int64_t len) { return {&x, col, row_stride, len}; }

namespace {

// Every row of `batch` samples, `width` elements from its start, lies inside the tensor.
void check_rows(const TokenRows& r, const char* name, int64_t batch, int64_t width) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string("attention_args: ") + name + ": " + why);
  };
  if (!r.tensor || !r.tensor->defined()) fail("no tensor");
  if (r.offset < 0 || r.len < 0 || r.row_stride < width || r.batch_stride < 0)
    fail("offset " + std::to_string(r.offset) + ", row stride " + std::to_string(r.row_stride) + ", batch stride " +
         std::to_string(r.batch_stride) + " for rows of " + std::to_string(width));
  if (batch > 0 && r.len > 0) {
    const int64_t last = r.offset + (batch - 1) * r.sample_stride() + (r.len - 1) * r.row_stride + width;
    if (last > r.tensor->numel())
      fail(std::to_string(batch) + " x " + std::to_string(r.len) + " rows of stride " + std::to_string(r.row_stride) +
           " (samples " + std::to_string(r.sample_stride()) + " apart) from element " + std::to_string(r.offset) +
           " overrun " + shape_str(r.tensor->shape()));
  }
}

}  // namespace

AttentionArgs attention_args(const TokenRows& q, const TokenRows& k, const TokenRows& v, const TokenRows& out,
                             int64_t batch, int64_t heads, int64_t head_dim) {
  const int64_t inner = heads * head_dim;
  check_rows(q, "q", batch, inner);
  check_rows(k, "k", batch, inner);
  check_rows(v, "v", batch, inner);
  check_rows(out, "out", batch, inner);
  if (q.len != out.len || k.len != v.len)
    throw std::invalid_argument("attention_args: q/out have " + std::to_string(q.len) + "/" + std::to_string(out.len) +
                                " tokens, k/v " + std::to_string(k.len) + "/" + std::to_string(v.len));
  for (const TokenRows* r : {&k, &v, &out})
    if (r->tensor->device() != q.tensor->device() || r->tensor->dtype() != q.tensor->dtype())
      throw std::invalid_argument("attention_args: q, k, v and out must share one device and dtype");
  AttentionArgs a;
  a.q = q.tensor->raw_at(q.offset), a.k = k.tensor->raw_at(k.offset), a.v = v.tensor->raw_at(v.offset);
  // The output tensor is the destination: a handle to writable storage.
  a.out = const_cast<void*>(out.tensor->raw_at(out.offset));
  a.device = q.tensor->device(), a.dtype = q.tensor->dtype();
  a.batch = batch, a.heads = heads, a.q_len = q.len, a.kv_len = k.len, a.head_dim = head_dim;
  a.q_row_stride = q.row_stride, a.k_row_stride = k.row_stride, a.v_row_stride = v.row_stride;
  a.out_row_stride = out.row_stride;
  a.q_batch_stride = q.sample_stride(), a.k_batch_stride = k.sample_stride();
  a.v_batch_stride = v.sample_stride(), a.out_batch_stride = out.sample_stride();
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return a;
}

}  // namespace ditgen::ops
