// The parallel attention module (src/parallel/) over real MPI, run as
// `mpirun -np N mpi_parallel_attention` for N in {2, 3} (tests/CMakeLists.txt):
// Ulysses and ring self-attention on uneven token shards against attention
// of the whole sequence on one process, local (naive patch) self-attention
// against a double-precision loop over each rank's own tokens, gather_tokens, the tp helpers
// (row-parallel linear against a plain linear, the chunked column gather),
// and the frame <-> token switch of video activations (uneven frames and
// tokens, ranks holding none) against a host reference.
//
// Design as mpi_collectives.cpp: every rank builds the same whole inputs
// from one seed, takes its part, runs the same test cases in the same order
// (they are collective) with non-throwing CHECKs only, and the ranks agree
// on the worst result at the end.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "ops/test_helpers.h"
#include "parallel/communicator.h"
#include "parallel/frame_switch.h"
#include "parallel/mpi_runtime.h"
#include "parallel/sequence_attention.h"
#include "parallel/shard.h"
#include "parallel/tensor_parallel.h"
#include "parallel/token_shard.h"
#include "mpi_test_main.h"

using namespace ditgen;
using namespace ditgen::parallel;
using testing::random_tensor;
using testing::rel_l2;

namespace {

Communicator& world() { return MpiRuntime::world(); }

#define RANK_INFO() INFO("rank ", world().rank(), " of ", world().size())

// Columns [c0, c0 + w) of every row of a (R, C) view of x (rows = numel / C).
Tensor columns(const Tensor& x, int64_t c0, int64_t w) {
  const int64_t c = x.shape().back(), rows = x.numel() / c;
  Shape shape = x.shape();
  shape.back() = w;
  Tensor y = Tensor::empty(shape);
  ops::copy_rows(x, c0, c, y, 0, w, rows, w);
  return y;
}

// Weights for a mixed machine, one per rank: 3 for rank 0, 1 for the rest.
Sharding uneven_weights() {
  std::vector<int64_t> w(static_cast<size_t>(world().size()), 1);
  w[0] = 3;
  return Sharding(w);
}

void check_self_attention(SequenceMode mode, int64_t bsz, int64_t n, int64_t heads, int64_t hd,
                          const Sharding& split = {}) {
  RANK_INFO();
  CAPTURE(split.even());
  CAPTURE(mode == SequenceMode::kRing ? "ring" : "ulysses");
  CAPTURE(n);
  CAPTURE(heads);
  const int64_t inner = heads * hd;
  const Tensor q = random_tensor({bsz, n, inner}, 101, -2, 2), k = random_tensor({bsz, n, inner}, 102, -2, 2),
               v = random_tensor({bsz, n, inner}, 103, -2, 2);
  Tensor ref = Tensor::empty(q.shape());
  ops::attention(ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(ref), bsz, heads,
                                     hd));
  SequenceParallelAttention attn(&world(), mode, DType::kF32, split);
  const Range mine = split.range(n, world().size(), world().rank());
  const Tensor qs = token_rows(q, mine), ks = token_rows(k, mine), vs = token_rows(v, mine);
  Tensor out = Tensor::empty(qs.shape());
  attn.self_attention(qs, ks, vs, hd, n, out);
  CHECK(rel_l2(out, token_rows(ref, mine)) < 1e-5);
  // Every rank's rows together are the whole output.
  CHECK(rel_l2(gather_tokens(&world(), out, n, split), ref) < 1e-5);
}

}  // namespace

TEST_CASE("ulysses self-attention on uneven token shards equals whole-sequence attention") {
  for (int64_t n : {7, 25, 64}) check_self_attention(SequenceMode::kUlysses, 2, n, 6, 8);
  check_self_attention(SequenceMode::kUlysses, 1, 300, 6, 72);  // head sizes as in real models, several key chunks
}

TEST_CASE("ring self-attention on uneven token shards equals whole-sequence attention") {
  for (int64_t n : {7, 25, 64}) check_self_attention(SequenceMode::kRing, 2, n, 3, 8);
  check_self_attention(SequenceMode::kRing, 1, 300, 5, 72);  // heads need not divide by sp
}

TEST_CASE("ring self-attention on weighted token shards (parallel.sp_weights) equals whole-sequence attention") {
  for (int64_t n : {9, 25, 64}) check_self_attention(SequenceMode::kRing, 2, n, 3, 8, uneven_weights());
}

TEST_CASE("local (naive patch) self-attention: each rank's tokens attend only among themselves") {
  RANK_INFO();
  const int64_t bsz = 2, heads = 3, hd = 8, inner = heads * hd;
  for (int64_t n : {7, 26}) {
    CAPTURE(n);
    const Tensor q = random_tensor({bsz, n, inner}, 111, -2, 2), k = random_tensor({bsz, n, inner}, 112, -2, 2),
                 v = random_tensor({bsz, n, inner}, 113, -2, 2);
    const Range mine = even_shard(n, world().size(), world().rank());
    const Tensor qs = token_rows(q, mine), ks = token_rows(k, mine), vs = token_rows(v, mine);
    Tensor out = Tensor::empty(qs.shape());
    SequenceParallelAttention(&world(), SequenceMode::kLocal).self_attention(qs, ks, vs, hd, n, out);
    // Reference: softmax attention in double over the band's keys only.
    const int64_t p = mine.size();
    std::vector<double> want(static_cast<size_t>(bsz * p * inner));
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < p; ++i) {
          std::vector<double> s(static_cast<size_t>(p));
          double top = -1e300, sum = 0;
          for (int64_t j = 0; j < p; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < hd; ++c)
              dot += static_cast<double>(qs[(b * p + i) * inner + h * hd + c]) * ks[(b * p + j) * inner + h * hd + c];
            s[j] = dot * scale;
            top = std::max(top, s[j]);
          }
          for (double& x : s) sum += (x = std::exp(x - top));
          for (int64_t c = 0; c < hd; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < p; ++j) acc += s[j] / sum * vs[(b * p + j) * inner + h * hd + c];
            want[(b * p + i) * inner + h * hd + c] = acc;
          }
        }
    CHECK(rel_l2(out, want) < 1e-5);
    // Not the whole-sequence result (a mode that silently attended to every
    // token would pass the check above only by accident).
    Tensor whole = Tensor::empty(q.shape());
    ops::attention(ops::attention_args(ops::rows_of(q), ops::rows_of(k), ops::rows_of(v), ops::rows_of(whole), bsz,
                                       heads, hd));
    CHECK(rel_l2(out, token_rows(whole, mine)) > 1e-2);
  }
}

TEST_CASE("gather_tokens reassembles the whole sequence on every rank") {
  RANK_INFO();
  for (int64_t n : {5, 7, 26}) {
    const Tensor whole = random_tensor({3, n, 4}, 104);
    const Tensor got = gather_tokens(&world(), token_rows(whole, even_shard(n, world().size(), world().rank())), n);
    CHECK(got.shape() == whole.shape());
    CHECK(std::memcmp(got.data(), whole.data(), whole.numel() * sizeof(float)) == 0);
  }
}

TEST_CASE("row-parallel linear over the tp ranks equals the plain linear") {
  RANK_INFO();
  const int64_t k = 6 * world().size();  // input features, split by columns
  const Tensor x = random_tensor({2, 5, k}, 105), w = random_tensor({7, k}, 106), b = random_tensor({7}, 107);
  const Tensor ref = ops::linear(x, w, &b);
  const Range cols = column_split(k, &world());
  const Tensor y = row_parallel_linear(&world(), columns(x, cols.begin, cols.size()), columns(w, cols.begin, cols.size()),
                                       b);
  CHECK(y.shape() == ref.shape());
  CHECK(rel_l2(y, ref) < 1e-5);
}

TEST_CASE("chunk columns gathered over the tp ranks give every chunk whole") {
  RANK_INFO();
  const int64_t chunks = 6, d = 4 * world().size(), bsz = 3;
  const Tensor whole = random_tensor({bsz, chunks * d}, 108);
  const Range cols = column_split(d, &world());
  Tensor local = Tensor::empty({bsz, chunks * cols.size()});
  for (int64_t c = 0; c < chunks; ++c)
    ops::copy_rows(whole, c * d + cols.begin, chunks * d, local, c * cols.size(), chunks * cols.size(), bsz,
                   cols.size());
  const Tensor got = gather_chunk_columns(&world(), local, chunks);
  CHECK(got.shape() == whole.shape());
  CHECK(std::memcmp(got.data(), whole.data(), whole.numel() * sizeof(float)) == 0);
}

TEST_CASE("the frame switch turns frame shards into token shards and back (uneven F and N, weighted shares)") {
  const int parts = world().size(), me = world().rank();
  struct Case { int64_t bsz, frames, tokens, c; };
  for (const Sharding& split : {Sharding(), uneven_weights()})
  for (Case s : {Case{2, 5, 7, 3}, Case{1, 2, 7, 4}, Case{2, 6, 2, 5}, Case{1, 9, 16, 8}}) {
    RANK_INFO();
    CAPTURE(split.even());
    CAPTURE(s.frames);
    CAPTURE(s.tokens);
    // The whole video and a host reference of both shards.
    const Tensor video = random_tensor({s.bsz, s.frames, s.tokens, s.c}, 109);
    const Range f = split.range(s.frames, parts, me), t = split.range(s.tokens, parts, me);
    Tensor by_frames = Tensor::empty({s.bsz, f.size(), s.tokens, s.c});
    Tensor by_tokens = Tensor::empty({s.bsz, s.frames, t.size(), s.c});
    for (int64_t b = 0; b < s.bsz; ++b)
      for (int64_t fi = 0; fi < s.frames; ++fi)
        for (int64_t ti = 0; ti < s.tokens; ++ti)
          for (int64_t e = 0; e < s.c; ++e) {
            const float val = video[((b * s.frames + fi) * s.tokens + ti) * s.c + e];
            if (fi >= f.begin && fi < f.end)
              by_frames[((b * f.size() + fi - f.begin) * s.tokens + ti) * s.c + e] = val;
            if (ti >= t.begin && ti < t.end)
              by_tokens[((b * s.frames + fi) * t.size() + ti - t.begin) * s.c + e] = val;
          }
    const Tensor tokens = frames_to_tokens(&world(), by_frames, s.frames, split);
    CHECK(tokens.shape() == by_tokens.shape());
    CHECK((by_tokens.numel() == 0 ||
           std::memcmp(tokens.data(), by_tokens.data(), by_tokens.numel() * sizeof(float)) == 0));
    const Tensor frames = tokens_to_frames(&world(), by_tokens, s.tokens, split);
    CHECK(frames.shape() == by_frames.shape());
    CHECK((by_frames.numel() == 0 ||
           std::memcmp(frames.data(), by_frames.data(), by_frames.numel() * sizeof(float)) == 0));
  }
}

int main(int argc, char** argv) { return ditgen::testing::run_mpi_doctest(argc, argv, "mpi_parallel_attention"); }
