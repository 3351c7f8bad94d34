// Attention's forward keeps diffusers' order: projections, q/k norms, rotary
// positions, the core, the output projection. Buffers are this rank's
// (B, P, Dl) of its heads; the core's output goes to to_out before any
// gate, so a PAB branch around a call holds what diffusers' hook caches.
#include "models/nn/attention.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "ops/ops.h"
#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models::nn {

namespace {

int64_t norm_width(const AttentionDims& d) { return d.qk_norm_span == QkNormSpan::kPerHead ? d.head_dim : d.inner(); }

bool across_heads(const AttentionDims& d) {
  return d.qk_norm != QkNorm::kNone && d.qk_norm_span == QkNormSpan::kAcrossHeads;
}

}  // namespace

AttentionCore sequence_core(const parallel::PatchPipeline& pipe, int64_t layer, parallel::Range patch, int64_t n,
                            int64_t head_dim, parallel::StaleKeyValues* stale_kv,
                            const parallel::SequenceParallelAttention& seq) {
  return [&pipe, &seq, layer, patch, n, head_dim, stale_kv](const Tensor& q, const Tensor& k, const Tensor& v,
                                                             Tensor& out) {
    pipe.attention(layer, patch, n, q, k, v, head_dim, out, stale_kv, seq);
  };
}

TensorDecls Attention::tensors(const std::string& prefix, const AttentionDims& d) {
  const int64_t inner = d.inner();
  TensorDecls t = ColumnParallelLinear::tensors(prefix + "to_q.", inner, d.query_dim);
  append(t, ColumnParallelLinear::tensors(prefix + "to_k.", inner, d.context_dim));
  append(t, ColumnParallelLinear::tensors(prefix + "to_v.", inner, d.context_dim));
  append(t, RowParallelLinear::tensors(prefix + "to_out.0.", d.query_dim, inner));
  if (d.qk_norm == QkNorm::kNone) return t;
  // Across heads, tp splits the weight with the heads (column_split rows).
  const TpSplit split = across_heads(d) ? TpSplit::kRows : TpSplit::kWhole;
  for (const char* norm : {"norm_q.", "norm_k."}) {
    t.push_back({prefix + norm + "weight", {norm_width(d)}, split});
    if (d.qk_norm == QkNorm::kLayerNorm) t.push_back({prefix + norm + "bias", {norm_width(d)}});
  }
  if (d.added_kv_dim > 0) {
    append(t, ColumnParallelLinear::tensors(prefix + "add_k_proj.", inner, d.added_kv_dim));
    append(t, ColumnParallelLinear::tensors(prefix + "add_v_proj.", inner, d.added_kv_dim));
    t.push_back({prefix + "norm_added_k.weight", {norm_width(d)}, split});
  }
  return t;
}

Attention Attention::load(const io::WeightStore& w, const std::string& prefix, const AttentionDims& d,
                          parallel::Communicator* tp, const Placement& place) {
  const int size = parallel::group_size(tp);
  // A LayerNorm across heads would need the mean and variance over every rank's heads.
  if (d.qk_norm == QkNorm::kLayerNorm && d.qk_norm_span == QkNormSpan::kAcrossHeads && size > 1)
    not_supported("q/k LayerNorms across heads under tp > 1 (" + prefix + "norm_q: tp = " + std::to_string(size) + ")");
  if (d.added_kv_dim > 0 && d.qk_norm != QkNorm::kRmsNorm)
    not_supported("added keys and values without an RMSNorm on k (" + prefix + "norm_added_k)");
  Attention a;
  a.dims_ = d;
  a.place_ = place;
  a.tp_ = tp;
  a.local_heads_ = d.heads / size;
  const int64_t inner = d.inner();
  a.to_q_ = ColumnParallelLinear::load(w, prefix + "to_q.", inner, tp, place);
  a.to_k_ = ColumnParallelLinear::load(w, prefix + "to_k.", inner, tp, place);
  a.to_v_ = ColumnParallelLinear::load(w, prefix + "to_v.", inner, tp, place);
  a.to_out_ = RowParallelLinear::load(w, prefix + "to_out.0.", inner, tp, place);
  if (d.added_kv_dim > 0) {
    a.add_k_ = ColumnParallelLinear::load(w, prefix + "add_k_proj.", inner, tp, place);
    a.add_v_ = ColumnParallelLinear::load(w, prefix + "add_v_proj.", inner, tp, place);
  }
  if (across_heads(d) && size > 1) {  // this rank's heads' columns
    const parallel::Range mine = parallel::column_split(inner, tp);
    a.norm_q_w_ = place.put(w.load_rows(prefix + "norm_q.weight", mine.begin, mine.end));
    a.norm_k_w_ = place.put(w.load_rows(prefix + "norm_k.weight", mine.begin, mine.end));
    if (d.added_kv_dim > 0)
      a.norm_added_k_w_ = place.put(w.load_rows(prefix + "norm_added_k.weight", mine.begin, mine.end));
  } else if (d.qk_norm != QkNorm::kNone) {
    a.norm_q_w_ = place.put(w.load(prefix + "norm_q.weight"));
    a.norm_k_w_ = place.put(w.load(prefix + "norm_k.weight"));
    if (d.added_kv_dim > 0) a.norm_added_k_w_ = place.put(w.load(prefix + "norm_added_k.weight"));
    if (d.qk_norm == QkNorm::kLayerNorm) {
      a.norm_q_b_ = place.put(w.load(prefix + "norm_q.bias"));
      a.norm_k_b_ = place.put(w.load(prefix + "norm_k.bias"));
    }
  }
  return a;
}

Tensor Attention::rms_norm_across_tp(const Tensor& x, const Tensor& weight) const {
  const Tensor h = x.to(Device::kCPU, DType::kF32);
  const Tensor w = weight.to(Device::kCPU, DType::kF32);
  const int64_t width = h.dim(h.ndim() - 1), rows = h.numel() / width;
  std::vector<float> sums(static_cast<size_t>(rows));  // each row's squared sum over this rank's columns
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < width; ++c) s += static_cast<double>(h[r * width + c]) * h[r * width + c];
    sums[static_cast<size_t>(r)] = static_cast<float>(s);
  }
  tp_->all_reduce_sum(sums.data(), rows);
  Tensor y = Tensor::empty(h.shape());
  const float full = static_cast<float>(dims_.inner());
  for (int64_t r = 0; r < rows; ++r) {
    const float rstd = 1.0f / std::sqrt(sums[static_cast<size_t>(r)] / full + dims_.qk_norm_eps);
    for (int64_t c = 0; c < width; ++c) y[r * width + c] = h[r * width + c] * rstd * w[c];
  }
  return place_.put(y);
}

Tensor Attention::normalized(const Tensor& x, const Tensor& weight, const Tensor& bias) const {
  if (across_heads(dims_) && parallel::group_size(tp_) > 1) return rms_norm_across_tp(x, weight);
  const int64_t width = norm_width(dims_);
  const Tensor rows = x.reshape({x.numel() / width, width});  // one row per head (or per token)
  const Tensor y = dims_.qk_norm == QkNorm::kRmsNorm ? ops::rms_norm(rows, weight, dims_.qk_norm_eps)
                                                     : ops::layer_norm(rows, &weight, &bias, dims_.qk_norm_eps);
  return y.reshape(x.shape());
}

void Attention::normalize(Tensor& q, Tensor& k) const {
  if (dims_.qk_norm == QkNorm::kNone) return;
  q = normalized(q, norm_q_w_, norm_q_b_);
  k = normalized(k, norm_k_w_, norm_k_b_);
}

Tensor Attention::self_attention(const Tensor& x, const AttentionCore& core, const LayoutSwitch* around,
                                 const Rotary* rotary) const {
  Tensor input = x;  // (B', P', D) in the attention's layout
  if (around) {
    profile::ScopedTimer t("layout_switch");
    input = around->enter(x);
  }
  const int64_t b = input.dim(0), p = input.dim(1), dl = local_heads_ * dims_.head_dim;
  Tensor q = place_.empty({b, p, dl}), k = place_.empty({b, p, dl}), v = place_.empty({b, p, dl});
  {
    profile::ScopedTimer t("qkv_proj");
    to_q_.into(input, q, 0);
    to_k_.into(input, k, 0);
    to_v_.into(input, v, 0);
  }
  normalize(q, k);
  if (rotary) (*rotary)(q, k);
  Tensor out = place_.empty({b, p, dl});
  {
    profile::ScopedTimer t("attention");
    core(q, k, v, out);
  }
  if (around) {
    profile::ScopedTimer t("layout_switch");
    out = around->leave(out);
  }
  profile::ScopedTimer t("out_proj");
  return to_out_(out);
}

void Attention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const CrossContext& context,
                       Tensor& out) const {
  const int64_t bsz = q.dim(0), p = q.dim(1), dl = q.dim(2), texts = k.dim(0);
  if (texts * context.repeat != bsz)
    throw std::logic_error("cross-attention: " + std::to_string(texts) + " texts x " +
                           std::to_string(context.repeat) + " samples each for a batch of " + std::to_string(bsz));
  profile::ScopedTimer t("cross_attention");
  Tensor per_text = out.reshape({texts, context.repeat * p, dl});  // a view: each text's queries in a row
  parallel::SequenceParallelAttention::cross_attention(q.reshape({texts, context.repeat * p, dl}), k, v,
                                                       dims_.head_dim, per_text, context.kv_lens, place_.dtype);
}

Tensor Attention::cross_attention(const Tensor& x, const CrossContext& context, const CrossContext* added) const {
  if (!context.tokens) throw std::invalid_argument("cross-attention without a context");
  if ((dims_.added_kv_dim > 0) != (added && added->tokens))
    throw std::invalid_argument(dims_.added_kv_dim > 0 ? "cross-attention with added keys and values needs their context"
                                                       : "cross-attention: an added context without add_k_proj");
  const int64_t bsz = x.dim(0), p = x.dim(1), dl = local_heads_ * dims_.head_dim;
  Tensor q, k, v;
  {
    profile::ScopedTimer t("cross_qkv_proj");
    q = to_q_(x);                // (B, P, Dl)
    k = to_k_(*context.tokens);  // (T, M, Dl), T = B / repeat
    v = to_v_(*context.tokens);  // (T, M, Dl)
  }
  normalize(q, k);
  Tensor out = place_.empty({bsz, p, dl});
  attend(q, k, v, context, out);
  if (added) {  // the added context's own keys and values, the same queries; the outputs summed
    Tensor added_k, added_v;
    {
      profile::ScopedTimer t("cross_qkv_proj");
      added_k = normalized(add_k_(*added->tokens), norm_added_k_w_, {});  // (T, M', Dl)
      added_v = add_v_(*added->tokens);                                   // (T, M', Dl)
    }
    Tensor added_out = place_.empty({bsz, p, dl});
    attend(q, added_k, added_v, *added, added_out);
    ops::add_(out, added_out);
  }
  profile::ScopedTimer t("out_proj");
  return to_out_(out);
}

}  // namespace ditgen::models::nn
