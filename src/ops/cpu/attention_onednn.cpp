// bfloat16 attention as oneDNN matmuls, for CPUs where oneDNN multiplies
// bfloat16 with AMX (Sapphire Rapids and later): there its brgemm kernels run
// the two products of attention several times faster than attention.cpp's
// AVX512-BF16 micro-kernels (the projections around attention run at ~1500
// GFLOP/s on 2 cores, the tile kernel at ~165), so only the softmax between
// them is ours.
//
// Same numerics as the tile kernel's bfloat16 compute (attention.cpp, and
// ops.h): the scaled queries, the keys, the values and the probabilities
// rounded to bfloat16 and multiplied exactly, float32 sums; scores, softmax
// (kernels/math/softmax.h's formulas), its denominator (of the unrounded
// probabilities) and the output float32. Only the order of the sums differs.
//
// Layout of the work, per sample b (its own key count, kv_lens):
// - The keys are taken in chunks (all of them at once up to kMaxKeyChunk and
//   a 16 MB budget for the chunk's bfloat16 keys and values). A chunk's keys
//   and values are rounded once per head into dense rows, key rows padded
//   with zeros to a multiple of kKeyAlign (so that calls of different key
//   counts, prompt lengths, share a few primitive shapes), and packed into
//   the blocked layout oneDNN's AMX kernels read (pairs along the summed
//   index): once per chunk, instead of oneDNN copying them into that layout
//   inside every query block's matmul.
// - Work items are (head, query block), one per OpenMP iteration; each runs
//   S = Q K^T (bq x keys, float32) and O = P V (bq x d) as two oneDNN matmuls
//   called inside the parallel loop, where oneDNN runs them on the calling
//   thread alone (it does not nest parallelism): the block's scores stay in
//   that core's L2 (the query block is sized for it), instead of a
//   heads x queries x keys array going through memory (at Wan 1.3B's 1280
//   tokens, ~0.5 GB of score traffic per layer against ~7 ms of AMX
//   products: by estimate, memory would dominate).
// - More than one chunk: the online softmax of softmax.h across chunks, its
//   running max and sum per (head, query) and the unnormalised outputs kept
//   for a pass of queries whose float32 outputs fit a 32 MB budget (the
//   chunks' keys and values are rounded again for each pass). So scratch is
//   bounded at any sequence length: keys and values 16 MB, outputs 32 MB,
//   ~1.5 MB of scores per thread.
// Primitives are built before the parallel loop (so that a failure throws
// where it can be caught) and cached by onednn_matmul.
#include "ops/cpu/attention_onednn.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>

#include "kernels/math/softmax.h"
#include "ops/cpu/bf16_round.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/thread_scratch.h"

namespace ditgen::ops::cpu {

namespace {

constexpr int64_t kKeyAlign = 64;                 // key rows padded to: whole AMX tiles (32 bf16 pairs), few shapes
constexpr int64_t kMaxKeyChunk = 2048;            // keys per chunk at most
constexpr int64_t kKeyValueBytes = 16ll << 20;    // a chunk's bfloat16 keys and values, all heads
constexpr int64_t kAccumulatorBytes = 32ll << 20; // float32 outputs of one pass of queries over several chunks
constexpr int64_t kScoreBytes = 1536ll << 10;     // a block's float32 scores and bf16 probabilities: within L2
constexpr int64_t kMinQueryBlock = 32, kMaxQueryBlock = 256;

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Row length of our bfloat16 query, key and value rows: the head size made
// even with a zero. AMX multiplies bfloat16 in pairs along the summed index,
// and oneDNN's AMX kernels read an odd row's last pair whole, its second
// element past the row (garbage, NaN at worst, times a zero weight); the
// products then run over the even length.
constexpr int64_t pair_len(int64_t d) { return round_up(d, 2); }

// How one sample's attention is cut.
struct Blocking {
  int64_t key_chunk;    // keys per chunk
  int64_t chunks;       // chunks over the sample's keys
  int64_t key_pad;      // padded rows of the largest chunk
  int64_t query_block;  // queries per work item
  int64_t pass_rows;    // queries per pass over the chunks
};

Blocking blocking(const AttentionArgs& a, int64_t keys) {
  const Bf16Hooks& hooks = bf16_hooks();
  const int64_t inner = a.heads * a.head_dim;
  Blocking k{};
  k.key_chunk = hooks.attention_key_chunk > 0
                    ? hooks.attention_key_chunk
                    : std::clamp(kKeyValueBytes / (inner * 4) / kKeyAlign * kKeyAlign, kKeyAlign, kMaxKeyChunk);
  k.key_chunk = std::min(k.key_chunk, keys);
  k.chunks = (keys + k.key_chunk - 1) / k.key_chunk;
  k.key_pad = round_up(k.key_chunk, kKeyAlign);
  k.query_block = std::clamp(kScoreBytes / (k.key_pad * 6) / kMinQueryBlock * kMinQueryBlock, kMinQueryBlock,
                             kMaxQueryBlock);
  if (k.chunks == 1) {
    k.pass_rows = a.q_len;  // no running outputs to keep: one pass
  } else if (hooks.attention_query_rows > 0) {
    k.pass_rows = hooks.attention_query_rows;
  } else {
    k.pass_rows = std::max(k.query_block, kAccumulatorBytes / (inner * 4) / k.query_block * k.query_block);
  }
  k.pass_rows = std::max<int64_t>(1, std::min(k.pass_rows, a.q_len));
  return k;
}

// The two products of a block of bq queries over key_pad keys, bfloat16
// operands, Q and P in dense rows, K and V packed (onednn_pack_b), dp =
// pair_len(d): S = Q K^T (bq x key_pad), O = P V (bq x dp).
MatmulCall score_call(int64_t bq, int64_t key_pad, int64_t dp) {
  MatmulCall call{bq, key_pad, dp, false, true, dp, dp, key_pad, DType::kBF16};
  call.packed_b = true;
  return call;
}
MatmulCall output_call(int64_t bq, int64_t key_pad, int64_t dp) {
  MatmulCall call{bq, dp, key_pad, false, true, key_pad, key_pad, dp, DType::kBF16};
  call.packed_b = true;
  return call;
}

// A chunk's packed keys and values: head h's at kb + h * k_bytes, vb + h * v_bytes.
struct PackedHeads {
  size_t k_bytes = 0, v_bytes = 0;  // per head, multiples of 64
};
PackedHeads packed_heads(int64_t key_pad, int64_t dp) {
  auto line_up = [](size_t n) { return (n + 63) / 64 * 64; };
  return {line_up(onednn_packed_b_bytes(key_pad, dp)), line_up(onednn_packed_b_bytes(dp, key_pad))};
}

// Runs fn(i) for i < n on the OpenMP threads, dynamically scheduled. An
// exception must not leave an OpenMP region: the first one is kept and
// rethrown after it.
template <class F>
void parallel_tasks(int64_t n, const F& fn) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
#pragma omp critical(attention_onednn_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

bool fast_kernel(const MatmulCall& call, bool need_amx) {
  const char* name = onednn_kernel_name(call);
  return std::strncmp(name, "ref", 3) != 0 && (!need_amx || std::strstr(name, "amx") != nullptr);
}

// Builds (once, cached) the primitives of every block shape a chunk of
// `keys` keys uses, outside the parallel loop: bq = query_block and the last
// block of a pass.
void prepare_shapes(const Blocking& k, int64_t q_len, int64_t keys, int64_t dp) {
  const int64_t key_pad = round_up(keys, kKeyAlign);
  const int64_t last_pass = q_len - (q_len - 1) / k.pass_rows * k.pass_rows;  // rows of the last pass
  const int64_t block_rows[4] = {std::min(k.query_block, k.pass_rows), k.pass_rows % k.query_block,
                                 std::min(k.query_block, last_pass), last_pass % k.query_block};
  for (const int64_t bq : block_rows) {
    if (bq == 0) continue;
    onednn_kernel_name(score_call(bq, key_pad, dp));
    onednn_kernel_name(output_call(bq, key_pad, dp));
  }
}

// Keys and values [k0, k0 + keys) of sample b, every head's rounded to
// bfloat16 rows (key_pad, dp) and packed into kb / vb (PackedHeads); rows
// from `keys` on and the pad column are zeros (a zero value row times a
// zero probability: no NaN from stale memory).
void pack_keys_values(const AttentionArgs& a, int64_t b, int64_t k0, int64_t keys, int64_t key_pad,
                      const PackedHeads& sizes, unsigned char* kb, unsigned char* vb) {
  const int64_t d = a.head_dim, dp = pair_len(d);
  parallel_tasks(2 * a.heads, [&](int64_t task) {
    const int64_t h = task / 2;
    const bool values = task % 2;
    const float* src = values ? static_cast<const float*>(a.v) + b * a.v_batch_stride + k0 * a.v_row_stride
                              : static_cast<const float*>(a.k) + b * a.k_batch_stride + k0 * a.k_row_stride;
    const int64_t stride = values ? a.v_row_stride : a.k_row_stride;
    uint16_t* rows = thread_scratch<uint16_t, kAttentionHeadRows>(key_pad * dp);
    for (int64_t j = 0; j < keys; ++j) {
      round_to_bf16(src + j * stride + h * d, d, rows + j * dp);
      if (dp > d) rows[j * dp + d] = 0;
    }
    std::memset(rows + keys * dp, 0, (key_pad - keys) * dp * sizeof(uint16_t));
    // Keys are S's b as [n = keys, k = dp] rows; values P V's as [k = keys, n = dp].
    if (values)
      onednn_pack_b(dp, key_pad, false, rows, vb + h * sizes.v_bytes);
    else
      onednn_pack_b(key_pad, dp, true, rows, kb + h * sizes.k_bytes);
  });
}

// One chunk's softmax step for one query row: s holds its key_pad scores
// (the first `keys` real); on return s[j] = exp(s_j - max) and p the same
// rounded to bfloat16 (zeros past `keys`); max and sum are the row's running
// values (max = -inf, sum = 0 before the first chunk); returns the factor
// that rescales the outputs of earlier chunks.
float softmax_row(float* s, int64_t keys, int64_t key_pad, uint16_t* p, float& max, float& sum) {
  // The row max in 16 lanes: GCC leaves a max reduction scalar (it was
  // most of this function's time), but vectorises this fixed-width loop.
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = max;
  int64_t j = 0;
  for (; j + kLanes <= keys; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = lanes[l] > s[j + l] ? lanes[l] : s[j + l];
  float m = max;
  for (; j < keys; ++j) m = std::max(m, s[j]);
  for (int l = 0; l < kLanes; ++l) m = std::max(m, lanes[l]);
  float chunk_sum = 0.0f;
#pragma omp simd reduction(+ : chunk_sum)
  for (int64_t j = 0; j < keys; ++j) {
    s[j] = math::softmax_weight(s[j], m);
    chunk_sum += s[j];
  }
  round_to_bf16(s, keys, p);
  std::memset(p + keys, 0, (key_pad - keys) * sizeof(uint16_t));
  const float correction = math::softmax_rescale(max, m);  // ~0 on the first chunk (max = -inf)
  sum = sum * correction + chunk_sum;
  max = m;
  return correction;
}

// Everything one work item of one chunk needs.
struct Chunk {
  int64_t b, k0, keys, key_pad;
  bool first, last;
  const unsigned char* kb;  // packed keys and values, PackedHeads
  const unsigned char* vb;
  PackedHeads sizes;
  int64_t pass0, pass_rows;  // the pass's first query and its rows
  // Several chunks only (else null): the running values between chunks,
  // (heads, pass_rows) each, and the unnormalised outputs (pass_rows, heads * d).
  float* row_max;
  float* row_sum;
  float* acc;
};

// Queries [i0, i0 + bq) of head h over one chunk.
void attend_block(const AttentionArgs& a, const Chunk& c, int64_t h, int64_t i0, int64_t bq) {
  const int64_t d = a.head_dim, dp = pair_len(d), inner = a.heads * d;
  uint16_t* q16 = thread_scratch<uint16_t, kAttentionQueries>(bq * dp);
  float* scores = thread_scratch<float, kAttentionScores>(std::max(bq * c.key_pad, d));
  uint16_t* probs = thread_scratch<uint16_t, kAttentionProbs>(bq * c.key_pad);
  float* o = thread_scratch<float, kAttentionOutput>(bq * dp);

  // Q scaled, then rounded (the tile kernel's order), into dense rows.
  const float* q = static_cast<const float*>(a.q) + c.b * a.q_batch_stride + i0 * a.q_row_stride + h * d;
  for (int64_t i = 0; i < bq; ++i) {
    const float* qr = q + i * a.q_row_stride;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) scores[e] = qr[e] * a.scale;
    round_to_bf16(scores, d, q16 + i * dp);
    if (dp > d) q16[i * dp + d] = 0;
  }
  onednn_matmul(score_call(bq, c.key_pad, dp), q16, c.kb + h * c.sizes.k_bytes, nullptr, scores);

  if (a.bias) {
    const float* bias = a.bias + h * a.bias_head_stride + i0 * a.bias_row_stride + c.k0;
    for (int64_t i = 0; i < bq; ++i) {
      float* s = scores + i * c.key_pad;
      const float* br = bias + i * a.bias_row_stride;
#pragma omp simd
      for (int64_t j = 0; j < c.keys; ++j) s[j] += br[j];
    }
  }
  // The rows' running max and sum: from the previous chunk's, kept for the
  // next chunk's.
  float row_max[kMaxQueryBlock], row_sum[kMaxQueryBlock], correction[kMaxQueryBlock];
  float* kept_max = c.row_max ? c.row_max + h * c.pass_rows + (i0 - c.pass0) : nullptr;
  float* kept_sum = c.row_sum ? c.row_sum + h * c.pass_rows + (i0 - c.pass0) : nullptr;
  for (int64_t i = 0; i < bq; ++i) {
    row_max[i] = c.first ? -std::numeric_limits<float>::infinity() : kept_max[i];
    row_sum[i] = c.first ? 0.0f : kept_sum[i];
    correction[i] =
        softmax_row(scores + i * c.key_pad, c.keys, c.key_pad, probs + i * c.key_pad, row_max[i], row_sum[i]);
    if (!c.last) {
      kept_max[i] = row_max[i];
      kept_sum[i] = row_sum[i];
    }
  }
  onednn_matmul(output_call(bq, c.key_pad, dp), probs, c.vb + h * c.sizes.v_bytes, nullptr, o);

  float* out = static_cast<float*>(a.out) + c.b * a.out_batch_stride + i0 * a.out_row_stride + h * d;
  for (int64_t i = 0; i < bq; ++i) {
    const float* oi = o + i * dp;
    if (!c.first || !c.last) {  // several chunks: o' = o * correction + P V
      float* acc = c.acc + (i0 - c.pass0 + i) * inner + h * d;
      if (c.first) {
        std::memcpy(acc, oi, d * sizeof(float));
      } else {
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) acc[e] = acc[e] * correction[i] + oi[e];
      }
      oi = acc;
    }
    if (!c.last) continue;
    const float inv = 1.0f / row_sum[i];
    float* dst = out + i * a.out_row_stride;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) dst[e] = oi[e] * inv;
    if (a.lse) a.lse[(c.b * a.heads + h) * a.q_len + i0 + i] = math::softmax_lse(row_max[i], row_sum[i]);
  }
}

}  // namespace

bool attention_uses_onednn(const AttentionArgs& a) {
  if (a.compute != DType::kBF16 || bf16_hooks().emulate) return false;
  switch (bf16_hooks().attention) {
    case Bf16AttentionKernel::kTiles: return false;
    case Bf16AttentionKernel::kMatmul: return true;
    case Bf16AttentionKernel::kAuto: break;
  }
  if (!onednn_fast(DType::kBF16) || a.q_len == 0) return false;
  // Head sizes that fill AMX tiles (32 bf16 pairs along d) only. Measured
  // on 2 loaded Sapphire Rapids cores: Wan 1.3B (d = 128, 1280 and 512
  // keys) 2.1-2.6x faster on oneDNN, DiT-XL/2 (d = 72, 256 keys) 1.2x
  // slower (72 leaves a quarter of the score product's last tile empty;
  // whether d or the short key count costs more was not separated).
  if (a.head_dim % 32 != 0) return false;
  // The shapes of a full block over the first chunk stand for the call's.
  const Blocking k = blocking(a, a.kv_len);
  const int64_t bq = std::min(k.query_block, a.q_len), dp = pair_len(a.head_dim);
  return fast_kernel(score_call(bq, k.key_pad, dp), true) && fast_kernel(output_call(bq, k.key_pad, dp), true);
}

void attention_onednn(const AttentionArgs& a) {
  if (a.q_len == 0) return;
  const int64_t d = a.head_dim, dp = pair_len(d);
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t keys = a.kv_lens ? a.kv_lens[b] : a.kv_len;
    const Blocking k = blocking(a, keys);
    const PackedHeads largest = packed_heads(k.key_pad, dp);
    const size_t head_bytes = largest.k_bytes + largest.v_bytes;
    unsigned char* kv = reinterpret_cast<unsigned char*>(
        thread_scratch<CacheLine, kAttentionKeysValues>(static_cast<int64_t>(a.heads * head_bytes / 64)));
    const bool several = k.chunks > 1;
    float* state = several ? thread_scratch<float, kAttentionRowState>(2 * a.heads * k.pass_rows) : nullptr;
    float* acc = several ? thread_scratch<float, kAttentionAccumulator>(k.pass_rows * a.heads * d) : nullptr;
    for (int64_t c = 0; c < k.chunks; ++c)
      prepare_shapes(k, a.q_len, std::min(k.key_chunk, keys - c * k.key_chunk), dp);

    for (int64_t pass0 = 0; pass0 < a.q_len; pass0 += k.pass_rows) {
      const int64_t rows = std::min(k.pass_rows, a.q_len - pass0);
      const int64_t blocks = (rows + k.query_block - 1) / k.query_block;
      for (int64_t c = 0; c < k.chunks; ++c) {
        const int64_t k0 = c * k.key_chunk, chunk_keys = std::min(k.key_chunk, keys - k0);
        Chunk ch{};
        ch.b = b;
        ch.k0 = k0;
        ch.keys = chunk_keys;
        ch.key_pad = round_up(chunk_keys, kKeyAlign);
        ch.sizes = packed_heads(ch.key_pad, dp);
        ch.first = c == 0;
        ch.last = c == k.chunks - 1;
        ch.kb = kv;
        ch.vb = kv + a.heads * ch.sizes.k_bytes;
        ch.pass0 = pass0;
        ch.pass_rows = k.pass_rows;
        ch.row_max = state;
        ch.row_sum = several ? state + a.heads * k.pass_rows : nullptr;
        ch.acc = acc;
        pack_keys_values(a, b, ch.k0, ch.keys, ch.key_pad, ch.sizes, kv, kv + a.heads * ch.sizes.k_bytes);
        parallel_tasks(a.heads * blocks, [&](int64_t task) {
          const int64_t h = task / blocks, i0 = pass0 + task % blocks * k.query_block;
          attend_block(a, ch, h, i0, std::min(k.query_block, pass0 + rows - i0));
        });
      }
    }
  }
}

}  // namespace ditgen::ops::cpu
