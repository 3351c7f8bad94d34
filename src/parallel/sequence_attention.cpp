#include "parallel/sequence_attention.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "parallel/shard.h"
#include "parallel/tensor_collectives.h"
#include "parallel/token_shard.h"

namespace ditgen::parallel {

namespace {

Tensor like(const Tensor& x, Shape shape) { return Tensor::empty(std::move(shape), x.device(), x.dtype()); }

// q, k, v, out: (B, P, H*head_dim) alike; returns H.
int64_t check_operands(const char* who, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       int64_t head_dim) {
  if (q.ndim() != 3 || head_dim <= 0 || q.dim(2) % head_dim != 0 || out.shape() != q.shape() ||
      k.ndim() != 3 || v.shape() != k.shape() || k.dim(0) != q.dim(0) || k.dim(2) != q.dim(2))
    throw std::invalid_argument(std::string(who) + ": q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                                ", v " + shape_str(v.shape()) + ", out " + shape_str(out.shape()) + ", head_dim " +
                                std::to_string(head_dim));
  return q.dim(2) / head_dim;
}

}  // namespace

int64_t SequenceParallelAttention::local_tokens(int64_t n) const { return split_.size(n, size(), rank()); }

void SequenceParallelAttention::self_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim,
                                               int64_t n, Tensor& out, const KeyValueSource& context) const {
  const int64_t heads = check_operands("self_attention", q, k, v, out, head_dim);
  if (k.dim(1) != q.dim(1) || q.dim(1) != local_tokens(n))
    throw std::invalid_argument("self_attention: " + std::to_string(q.dim(1)) + " query and " +
                                std::to_string(k.dim(1)) + " key rows, rank " + std::to_string(rank()) +
                                " holds " + std::to_string(local_tokens(n)) + " of " + std::to_string(n) +
                                " tokens");
  if (context && size() > 1 && mode_ != SequenceMode::kUlysses)
    throw std::logic_error("self_attention: other keys and values need sp = 1 or Ulysses");
  if (size() == 1 || mode_ == SequenceMode::kLocal) {
    std::pair<Tensor, Tensor> kv;
    if (context) kv = context(k, v);
    const Tensor& keys = context ? kv.first : k;
    const Tensor& values = context ? kv.second : v;
    ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(keys), ops::rows_of(values),
                                               ops::rows_of(out), q.dim(0), heads, head_dim);
    a.compute = compute_;
    ops::attention(a);
  } else if (mode_ == SequenceMode::kRing) {
    ring(q, k, v, head_dim, n, out);
  } else {
    if (heads % size())
      throw std::invalid_argument("ulysses: sp = " + std::to_string(size()) + " must divide the " +
                                  std::to_string(heads) + " heads of this rank");
    ulysses(q, k, v, head_dim, n, out, context);
  }
}

// All-to-all from (B, P_me, Hl*hd) token shards of q, k, v to head shards
// (B, n, w) of the whole sequence (w = Hl*hd / sp: this rank's head columns
// after the switch), attention there, and the reverse all-to-all.
void SequenceParallelAttention::ulysses(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim,
                                        int64_t n, Tensor& out, const KeyValueSource& context) const {
  Communicator& comm = *sp_;
  const int sp = comm.size();
  const int64_t bsz = q.dim(0), p = q.dim(1), dl = q.dim(2), hd = head_dim;
  const int64_t w = dl / sp;
  std::vector<int64_t> send(sp), recv(sp);
  for (int j = 0; j < sp; ++j) {
    send[j] = 3 * bsz * p * w;
    recv[j] = 3 * bsz * split_.size(n, sp, j) * w;
  }
  // Send buffer: for each destination j, [q|k|v][b][token][its w columns]
  // (b and token together are the B*P rows of q, k, v).
  Tensor sendbuf = like(q, {std::max(3 * bsz * p * dl, bsz * n * w)}), recvbuf = like(q, {3 * bsz * n * w});
  const Tensor* qkv[3] = {&q, &k, &v};
  for (int j = 0; j < sp; ++j)
    for (int t = 0; t < 3; ++t)
      ops::copy_rows(*qkv[t], j * w, dl, sendbuf, (j * 3 + t) * bsz * p * w, w, bsz * p, w);
  all_to_all_v(comm, sendbuf, send, recvbuf, recv);
  // Reassemble (3, B, n, w) in global token order ([q|k|v] x batch as rows).
  Tensor full = like(q, {3, bsz, n, w});
  unshard_tokens(recvbuf, 3 * bsz, n, sp, w, full, split_);
  Tensor o = like(q, {bsz, n, w});
  if (context) {
    // The head shard's keys and values of the sequence, (B, n, w) each, to what the queries read.
    const std::pair<Tensor, Tensor> kv =
        context(full.slice0(1, 2).reshape({bsz, n, w}), full.slice0(2, 3).reshape({bsz, n, w}));
    ops::AttentionArgs a = ops::attention_args(ops::rows_of(full, 0, w, n), ops::rows_of(kv.first),
                                               ops::rows_of(kv.second), ops::rows_of(o), bsz, w / hd, hd);
    a.compute = compute_;
    ops::attention(a);
  } else {
    ops::AttentionArgs a = ops::attention_args(ops::rows_of(full, 0, w, n), ops::rows_of(full, bsz * n * w, w, n),
                                               ops::rows_of(full, 2 * bsz * n * w, w, n), ops::rows_of(o), bsz,
                                               w / hd, hd);
    a.compute = compute_;
    ops::attention(a);
  }
  // Back: rank j gets its tokens of our heads; we get our tokens of its heads.
  for (int j = 0; j < sp; ++j) {
    send[j] = bsz * split_.size(n, sp, j) * w;
    recv[j] = bsz * p * w;
  }
  shard_tokens(o, bsz, n, sp, w, sendbuf, split_);
  all_to_all_v(comm, sendbuf, send, recvbuf, recv);
  for (int j = 0; j < sp; ++j) ops::copy_rows(recvbuf, j * bsz * p * w, w, out, j * w, dl, bsz * p, w);
}

// This rank's queries meet every K/V shard as the shards travel around the
// ring; partial outputs merge by log-sum-exp.
void SequenceParallelAttention::ring(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim, int64_t n,
                                     Tensor& out) const {
  Communicator& comm = *sp_;
  const int sp = comm.size(), me = comm.rank();
  const int64_t bsz = q.dim(0), p = q.dim(1), dl = q.dim(2), hd = head_dim, heads = dl / hd;
  const int64_t p_max = split_.largest(n, sp);
  // K and V travel together as (B, P_src, 2*Dl) rows [k | v].
  Tensor cur = like(q, {bsz * p_max * 2 * dl}), next = like(q, {bsz * p_max * 2 * dl});
  ops::copy_rows(k, 0, dl, cur, 0, 2 * dl, bsz * p, dl);
  ops::copy_rows(v, 0, dl, cur, dl, 2 * dl, bsz * p, dl);
  // Log-sum-exp rows are float32 whatever the activation dtype.
  Tensor lse = Tensor::empty({bsz, heads, p}, q.device(), DType::kF32);
  Tensor part_lse = Tensor::empty({bsz, heads, p}, q.device(), DType::kF32);
  Tensor part = like(q, {bsz, p, dl});
  for (int s = 0; s < sp; ++s) {
    const int src = (me - s + sp) % sp;  // whose K/V we hold now
    const int64_t p_src = split_.size(n, sp, src);
    ops::AttentionArgs a =
        ops::attention_args(ops::rows_of(q), ops::rows_of(cur, 0, 2 * dl, p_src), ops::rows_of(cur, dl, 2 * dl, p_src),
                            ops::rows_of(s == 0 ? out : part), bsz, heads, hd);
    a.lse = static_cast<float*>((s == 0 ? lse : part_lse).raw());
    a.compute = compute_;
    ops::attention(a);
    if (s > 0) ops::attention_merge_(out, lse, part, part_lse, heads);
    if (s + 1 < sp) {
      const int64_t p_next = split_.size(n, sp, (me - s - 1 + sp) % sp);
      send_recv(comm, cur, bsz * p_src * 2 * dl, (me + 1) % sp, next, bsz * p_next * 2 * dl, (me - 1 + sp) % sp);
      std::swap(cur, next);
    }
  }
}

void SequenceParallelAttention::cross_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim,
                                                Tensor& out, const int32_t* kv_lens, DType compute) {
  const int64_t heads = check_operands("cross_attention", q, k, v, out, head_dim);
  ops::AttentionArgs a = ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(out),
                                             q.dim(0), heads, head_dim);
  a.kv_lens = kv_lens;
  a.compute = compute;
  ops::attention(a);
}

}  // namespace ditgen::parallel
