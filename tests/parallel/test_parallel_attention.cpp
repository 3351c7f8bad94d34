// Single-process tests of the parallel attention module (src/parallel/):
// the sp = 1 paths of SequenceParallelAttention (the bits of plain
// attention), cross-attention with per-sample key counts, token shard /
// unshard round trips with uneven n, and the tp helpers on the self
// communicator. The multi-rank paths run under mpirun (parallel/mpi/).
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "ops/test_helpers.h"
#include "parallel/communicator.h"
#include "parallel/frame_switch.h"
#include "parallel/sequence_attention.h"
#include "parallel/shard.h"
#include "parallel/tensor_parallel.h"
#include "parallel/token_shard.h"

using namespace ditgen;
using namespace ditgen::parallel;
using testing::random_tensor;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

// Rank r of n that moves no data: for the argument checks and the rank
// arithmetic of code that fails before communicating.
class IdleCommunicator final : public Communicator {
 public:
  IdleCommunicator(int r, int n) : r_(r), n_(n) {}
  int rank() const override { return r_; }
  int size() const override { return n_; }

 protected:
  void do_all_reduce_sum(float*, int64_t) override {}
  void do_all_gather(const float*, int64_t, float*) override {}
  void do_all_gather_v(const float*, int64_t, float*, const std::vector<int64_t>&) override {}
  void do_all_to_all_v(const float*, const std::vector<int64_t>&, float*, const std::vector<int64_t>&) override {}
  void do_send_recv(const float*, int64_t, int, float*, int64_t, int) override {}
  void do_send(const float*, int64_t, int) override {}
  void do_recv(float*, int64_t, int) override {}
  void do_broadcast_bytes(void*, size_t, int) override {}
  void do_barrier() override {}

 private:
  int r_, n_;
};

Tensor plain_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t head_dim) {
  Tensor out = Tensor::empty(q.shape());
  ops::attention(ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(out), q.dim(0),
                                     q.dim(2) / head_dim, head_dim));
  return out;
}

}  // namespace

TEST_CASE("sequence attention with sp = 1 is plain attention, bit for bit, in both modes") {
  const int64_t bsz = 2, n = 37, heads = 3, hd = 8;
  Tensor q = random_tensor({bsz, n, heads * hd}, 1), k = random_tensor({bsz, n, heads * hd}, 2),
         v = random_tensor({bsz, n, heads * hd}, 3);
  const Tensor ref = plain_attention(q, k, v, hd);
  auto self = make_self_communicator();
  for (Communicator* comm : {static_cast<Communicator*>(nullptr), self.get()})
    for (SequenceMode mode : {SequenceMode::kUlysses, SequenceMode::kRing}) {
      SequenceParallelAttention attn(comm, mode);
      CHECK(attn.size() == 1);
      CHECK(attn.local_tokens(n) == n);
      Tensor out = Tensor::empty(q.shape());
      attn.self_attention(q, k, v, hd, n, out);
      CHECK(same_bits(out, ref));
    }
}

TEST_CASE("sequence attention checks its operands and the ulysses head split") {
  Tensor q = Tensor::zeros({1, 4, 12}), out = Tensor::zeros({1, 4, 12});
  SequenceParallelAttention one;
  CHECK_THROWS_AS(one.self_attention(q, q, q, 4, 5, out), std::invalid_argument);  // 4 rows of 5 tokens
  CHECK_THROWS_AS(one.self_attention(q, q, q, 5, 4, out), std::invalid_argument);  // 12 columns, head_dim 5
  IdleCommunicator two(0, 2);
  SequenceParallelAttention ulysses(&two, SequenceMode::kUlysses);
  CHECK(ulysses.local_tokens(7) == 4);
  // 3 heads of 4 do not split over 2 ranks (7 tokens: rank 0 holds 4).
  CHECK_THROWS_AS(ulysses.self_attention(q, q, q, 4, 7, out), std::invalid_argument);
}

TEST_CASE("cross-attention: sharded queries, whole keys, per-sample key counts, no communication") {
  const int64_t bsz = 3, nq = 11, m = 9, heads = 2, hd = 8, inner = heads * hd;
  Tensor q = random_tensor({bsz, nq, inner}, 4), k = random_tensor({bsz, m, inner}, 5),
         v = random_tensor({bsz, m, inner}, 6);
  const std::vector<int32_t> lens = {9, 4, 1};
  Tensor out = Tensor::empty(q.shape());
  SequenceParallelAttention::cross_attention(q, k, v, hd, out, lens.data());
  for (int64_t b = 0; b < bsz; ++b) {
    const Range keys{0, lens[b]};
    Tensor qb = Tensor::empty({1, nq, inner});
    std::memcpy(qb.data(), q.data() + b * nq * inner, qb.numel() * sizeof(float));
    Tensor kb = Tensor::empty({1, m, inner}), vb = Tensor::empty({1, m, inner});
    std::memcpy(kb.data(), k.data() + b * m * inner, kb.numel() * sizeof(float));
    std::memcpy(vb.data(), v.data() + b * m * inner, vb.numel() * sizeof(float));
    const Tensor ref = plain_attention(qb, token_rows(kb, keys), token_rows(vb, keys), hd);
    CHECK(std::memcmp(ref.data(), out.data() + b * nq * inner, ref.numel() * sizeof(float)) == 0);
  }
  Tensor whole = Tensor::empty(q.shape());
  SequenceParallelAttention::cross_attention(q, k, v, hd, whole);
  CHECK(same_bits(whole, plain_attention(q, k, v, hd)));
}

TEST_CASE("token shards: rows of a range, and shard / unshard round trips with uneven n") {
  const int64_t rows = 3, width = 5;
  for (int64_t n : {1, 7, 25})
    for (int parts = 1; parts <= 4; ++parts) {
      if (n < parts) continue;
      CAPTURE(n);
      CAPTURE(parts);
      Tensor whole = random_tensor({rows, n, width}, 7);
      Tensor sharded = Tensor::empty({rows * n * width});
      shard_tokens(whole, rows, n, parts, width, sharded);
      // Rank j's block: its tokens of every row, packed.
      int64_t off = 0;
      bool packed = true;
      for (int j = 0; j < parts; ++j) {
        const Range r = even_shard(n, parts, j);
        const Tensor mine = token_rows(whole, r);
        packed = packed && std::memcmp(sharded.data() + off, mine.data(), mine.numel() * sizeof(float)) == 0;
        off += mine.numel();
      }
      CHECK(packed);
      Tensor back = Tensor::zeros({rows, n, width});
      unshard_tokens(sharded, rows, n, parts, width, back);
      CHECK(same_bits(back, whole));
    }
  Tensor x = random_tensor({2, 7, 3}, 8);
  const Tensor mid = token_rows(x, {2, 5});
  CHECK(mid.shape() == Shape{2, 3, 3});
  CHECK(mid[0] == x[2 * 3]);
  CHECK(mid[3 * 3] == x[7 * 3 + 2 * 3]);
  CHECK(token_rows(x, {0, 7}).data() == x.data());  // the whole range: x itself
}

TEST_CASE("gather_tokens and the frame switch on one rank are the identity, shapes are checked") {
  auto self = make_self_communicator();
  Tensor x = random_tensor({2, 7, 3}, 9);
  CHECK(same_bits(gather_tokens(self.get(), x, 7), x));
  CHECK(same_bits(gather_tokens(nullptr, x, 7), x));
  Tensor video = random_tensor({2, 5, 7, 3}, 10);
  CHECK(same_bits(frames_to_tokens(self.get(), video, 5), video));
  CHECK(same_bits(tokens_to_frames(nullptr, video, 7), video));
  CHECK_THROWS_AS(frames_to_tokens(nullptr, video, 6), std::invalid_argument);
  CHECK_THROWS_AS(tokens_to_frames(nullptr, video, 8), std::invalid_argument);
  IdleCommunicator two(1, 2);
  CHECK_THROWS_AS(gather_tokens(&two, x, 7), std::invalid_argument);  // rank 1 of 2 holds 3 of 7 tokens
}

TEST_CASE("tp helpers: column ranges, row-parallel linear and chunk gather on one rank") {
  auto self = make_self_communicator();
  const Range all = column_split(12, self.get());
  CHECK(all.begin == 0);
  CHECK(all.end == 12);
  for (int r = 0; r < 3; ++r) {
    IdleCommunicator three(r, 3);
    const Range mine = column_split(12, &three);
    CHECK(mine.begin == 4 * r);
    CHECK(mine.end == 4 * r + 4);
  }
  IdleCommunicator five(0, 5);
  CHECK_THROWS_AS(column_split(12, &five), std::invalid_argument);

  Tensor x = random_tensor({2, 5, 8}, 11), w = random_tensor({6, 8}, 12), b = random_tensor({6}, 13);
  const Tensor ref = ops::linear(x, w, &b);
  for (Communicator* comm : {static_cast<Communicator*>(nullptr), self.get()}) {
    const Tensor y = row_parallel_linear(comm, x, w, b);
    CHECK(y.shape() == ref.shape());
    CHECK(testing::rel_l2(y, ref) < 1e-6);
  }
  Tensor local = random_tensor({2, 18}, 14);
  CHECK(same_bits(gather_chunk_columns(self.get(), local, 6), local));
}
