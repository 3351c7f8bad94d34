// PixelAttention: two ways of storing it, one forward (per image: the
// fused q/k/v GEMM, one head over the pixels, the output GEMM onto the
// residual).
#include "models/nn/pixel_attention.h"

#include <algorithm>

#include "ops/attention_operands.h"
#include "ops/ops.h"

namespace ditgen::models::nn {

TensorDecls PixelAttention::separate_tensors(const std::string& prefix, int64_t c) {
  const char* now[4] = {"to_q.", "to_k.", "to_v.", "to_out.0."};
  const char* legacy[4] = {"query.", "key.", "value.", "proj_attn."};
  TensorDecls t;
  for (int i = 0; i < 4; ++i) {
    t.push_back({prefix + now[i] + "weight", {c, c}, TpSplit::kWhole, std::nullopt, {prefix + legacy[i] + "weight"},
                 {c, c, 1, 1}});
    t.push_back({prefix + now[i] + "bias", {c}, TpSplit::kWhole, std::nullopt, {prefix + legacy[i] + "bias"}});
  }
  return t;
}

PixelAttention PixelAttention::load_separate(const io::WeightStore& w, const std::string& prefix, int64_t c,
                                             const Placement& place) {
  const TensorDecls t = separate_tensors(prefix, c);
  PixelAttention a;
  a.place_ = place;
  Tensor qkv_w = Tensor::empty({3 * c, c}), qkv_b = Tensor::empty({3 * c});  // fused on the host
  for (int64_t i = 0; i < 3; ++i) {
    const size_t k = static_cast<size_t>(2 * i);
    const Tensor pw = load_declared(w, t[k]).to(DType::kF32), pb = load_declared(w, t[k + 1]).to(DType::kF32);
    std::copy(pw.data(), pw.data() + c * c, qkv_w.data() + i * c * c);
    std::copy(pb.data(), pb.data() + c, qkv_b.data() + i * c);
  }
  a.qkv_w_ = place.matrix(qkv_w);
  a.qkv_b_ = place.put(qkv_b);
  a.out_w_ = load_as(w, t[6], place, Placed::kPut);
  a.out_b_ = load_as(w, t[7], place, Placed::kPut);
  return a;
}

TensorDecls PixelAttention::fused_tensors(const std::string& prefix, int64_t c) {
  return {{prefix + "to_qkv.weight", {3 * c, c, 1, 1}},
          {prefix + "to_qkv.bias", {3 * c}},
          {prefix + "proj.weight", {c, c, 1, 1}},
          {prefix + "proj.bias", {c}}};
}

PixelAttention PixelAttention::load_fused(const io::WeightStore& w, const std::string& prefix, int64_t c,
                                          const Placement& place) {
  const TensorDecls t = fused_tensors(prefix, c);
  PixelAttention a;
  a.place_ = place;
  // The 1x1 convs as GEMM operands: qkv the b of a GEMM (its dtype the
  // arithmetic), proj the a (float32 on the CPU).
  const Tensor qkv = load_declared(w, t[0]);
  a.qkv_w_ = release_source(w, t[0].name, qkv, place.matrix(qkv.reshape({3 * c, c})));
  a.qkv_b_ = load_as(w, t[1], place, Placed::kPut);
  const Tensor proj = load_declared(w, t[2]);
  a.out_w_ = release_source(w, t[2].name, proj, place.put(proj.reshape({c, c})));
  a.out_b_ = load_as(w, t[3], place, Placed::kPut);
  return a;
}

void PixelAttention::add_to(Tensor normed, Tensor& out) const {
  const int64_t images = normed.dim(0), c = normed.dim(1), n = normed.dim(2) * normed.dim(3);
  // qkv[i][t, :] = normed[i][:, t]^T . qkv_w^T + qkv_b (token rows q | k | v).
  Tensor qkv = place_.empty({images * n, 3 * c});
  for (int64_t i = 0; i < images; ++i) {
    Tensor rows = qkv.slice0(i * n, (i + 1) * n);
    ops::gemm(true, true, 1.0f, normed.slice0(i, i + 1).reshape({c, n}), qkv_w_, 0.0f, rows);
  }
  ops::add_broadcast_(qkv, qkv_b_);
  normed = Tensor();

  Tensor attn = place_.empty({images * n, c});  // one head of c channels per image
  ops::AttentionArgs args = ops::attention_args(ops::rows_of(qkv, 0, 3 * c, n), ops::rows_of(qkv, c, 3 * c, n),
                                                ops::rows_of(qkv, 2 * c, 3 * c, n), ops::rows_of(attn, 0, c, n),
                                                images, 1, c);
  args.follow_attention_mode = false;  // --attention is the transformer's; head size c (512 in SD VAEs) here
  args.compute = place_.dtype;
  ops::attention(args);
  qkv = Tensor();

  // out[i] += out_b . 1^T + out_w . attn[i]^T, (C, H*W) per image.
  const Tensor ones = place_.put(Tensor::full({1, n}, 1.0f));
  for (int64_t i = 0; i < images; ++i) {
    Tensor o = out.slice0(i, i + 1).reshape({c, n});
    ops::gemm(false, false, 1.0f, out_b_.reshape({c, 1}), ones, 1.0f, o);
    ops::gemm(false, true, 1.0f, out_w_, attn.slice0(i * n, (i + 1) * n), 1.0f, o);
  }
}

}  // namespace ditgen::models::nn
