// CUDA attention against ops::attention (the CPU flash kernel) on odd shapes:
// both paths forced (flash where the device supports it, math always), every
// storage type, Q/K/V read from packed projection rows ([K | V] per token)
// with aligned and unaligned (padded) row strides, contiguous and
// interleaved batches (batch stride one token row), partial query and key
// tiles, the log-sum-exp output, ring-attention merging of key blocks, and
// an additive score bias (T5's relative position bias: the math path, which
// the automatic choice takes for it; forced flash is refused). Tolerances: gpu_test_helpers.h (float32 1e-5; the half types also round
// the probabilities before P·V, within the stated bounds).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

namespace {

struct Case {
  int64_t batch, heads, q_len, kv_len, head_dim;
  int64_t pad;  // extra elements per token row (pad % 8 != 0: no 16-byte loads)
};

// One attention problem, held on the host (rounded to the storage type) and
// on the device in the same layout. interleaved: the batch's token rows are
// interleaved ([N, B, stride] memory): row stride B * stride, batch stride one
// row, so batch and row strides are not tied to the sequence length.
struct Problem {
  Case c;
  cuda::DType t;
  bool interleaved;
  int64_t inner, q_stride, kv_stride, out_stride;
  float scale;  // 1/sqrt(head_dim); T5 uses 1
  Tensor q, kv;  // [B, q_len, q_stride], [B, kv_len, kv_stride] = [K | V | pad] (or [len, B, stride] interleaved)
  DeviceTensor dq, dkv;

  Problem(Case c_, cuda::DType t_, bool interleaved_ = false)
      : c(c_), t(t_), interleaved(interleaved_), inner(c.heads * c.head_dim), q_stride(inner + c.pad),
        kv_stride(2 * inner + c.pad), out_stride(inner + c.pad),
        scale(1.0f / std::sqrt(static_cast<float>(c.head_dim))),
        q(gputest::rounded(random_tensor({c.batch, c.q_len, q_stride}, 11, -2, 2), t)),
        kv(gputest::rounded(random_tensor({c.batch, c.kv_len, kv_stride}, 12, -2, 2), t)), dq(q, t), dkv(kv, t) {}

  // Row and batch strides of a tensor with `stride` elements per token row and `len` tokens.
  int64_t row(int64_t stride) const { return interleaved ? c.batch * stride : stride; }
  int64_t bat(int64_t stride, int64_t len) const { return interleaved ? stride : len * stride; }

  // Keys [k0, k1) into out (out_stride rows, laid out as q) and lse [B, heads, q_len].
  cuda::AttentionArgs device_args(int64_t k0, int64_t k1, DeviceTensor& out, DeviceTensor& lse) {
    cuda::AttentionArgs a;
    a.q = dq.data(), a.k = dkv.at(k0 * row(kv_stride)), a.v = dkv.at(k0 * row(kv_stride) + inner), a.out = out.data();
    a.lse = static_cast<float*>(lse.data());
    a.dtype = t;
    a.batch = c.batch, a.heads = c.heads, a.q_len = c.q_len, a.kv_len = k1 - k0, a.head_dim = c.head_dim;
    a.q_row_stride = row(q_stride), a.k_row_stride = a.v_row_stride = row(kv_stride);
    a.out_row_stride = row(out_stride);
    a.q_batch_stride = bat(q_stride, c.q_len), a.k_batch_stride = a.v_batch_stride = bat(kv_stride, c.kv_len);
    a.out_batch_stride = bat(out_stride, c.q_len);
    a.scale = scale;
    return a;
  }

  // CPU reference over all keys (or each sample's first kv_lens[b]), with
  // the score bias of `bias` (host memory) if any: out [B, q_len, inner],
  // lse [B, heads, q_len].
  void reference(Tensor& out, Tensor& lse, const int32_t* kv_lens = nullptr, const AttentionArgs* bias = nullptr) {
    out = Tensor::empty({c.batch, c.q_len, inner});
    lse = Tensor::empty({c.batch, c.heads, c.q_len});
    ops::AttentionArgs a;
    a.q = q.data(), a.k = kv.data(), a.v = kv.data() + inner, a.out = out.data(), a.lse = lse.data();
    a.batch = c.batch, a.heads = c.heads, a.q_len = c.q_len, a.kv_len = c.kv_len, a.head_dim = c.head_dim;
    a.q_row_stride = row(q_stride), a.k_row_stride = a.v_row_stride = row(kv_stride), a.out_row_stride = inner;
    a.q_batch_stride = bat(q_stride, c.q_len), a.k_batch_stride = a.v_batch_stride = bat(kv_stride, c.kv_len);
    a.out_batch_stride = c.q_len * inner;
    a.scale = scale;
    a.kv_lens = kv_lens;
    if (bias) {
      a.bias = bias->bias;
      a.bias_head_stride = bias->bias_head_stride;
      a.bias_row_stride = bias->bias_row_stride;
    }
    ops::attention(a);
  }

  // The [B, q_len, inner] part of a device output laid out as device_args says.
  Tensor unpad(const DeviceTensor& out) {
    Tensor padded = out.to_host({c.batch, c.q_len, out_stride});
    Tensor r = Tensor::empty({c.batch, c.q_len, inner});
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t n = 0; n < c.q_len; ++n)
        for (int64_t e = 0; e < inner; ++e)
          r[(b * c.q_len + n) * inner + e] = padded[b * bat(out_stride, c.q_len) + n * row(out_stride) + e];
    return r;
  }
};

bool flash_runs_here(int64_t head_dim, cuda::DType t) {
  const cuda::DeviceInfo& info = cuda::current_device_info();
  return cuda::flash_supported(info.major, info.minor, static_cast<int>(head_dim), t);
}

const Case kCases[] = {
    {3, 3, 37, 37, 72, 0},    // 3 heads of 72, 37 tokens: partial query and key tiles
    {2, 2, 130, 300, 64, 0},  // several query tiles, key tiles of 64 and 32 with remainders
    {1, 2, 70, 13, 128, 0},   // fewer keys than one tile
    {2, 3, 37, 65, 72, 3},    // unaligned row strides: scalar tile loads
    {1, 1, 1, 1, 64, 0},      // one query, one key
    {2, 3, 37, 50, 40, 0},    // head sizes without a flash kernel: math only
    {1, 2, 19, 70, 80, 5},
};

}  // namespace

TEST_CASE("cuda attention (flash and math paths) matches ops::attention, with lse") {
  bool skipped_flash = false;
  for (cuda::DType t : gputest::kAllTypes)
    for (const Case& c : kCases)
      for (AttentionMode mode : {AttentionMode::kFlash, AttentionMode::kMath})
        for (bool interleaved : {false, true}) {
          if (mode == AttentionMode::kFlash && !flash_runs_here(c.head_dim, t)) {
            skipped_flash = true;
            continue;
          }
          CAPTURE(cuda::dtype_name(t));
          CAPTURE(c.batch);
          CAPTURE(c.heads);
          CAPTURE(c.q_len);
          CAPTURE(c.kv_len);
          CAPTURE(c.head_dim);
          CAPTURE(c.pad);
          CAPTURE(mode == AttentionMode::kFlash ? "flash" : "math");
          CAPTURE(interleaved);
          Problem p(c, t, interleaved);
          DeviceTensor out(c.batch * c.q_len * p.out_stride, t), lse(c.batch * c.heads * c.q_len, cuda::DType::kF32);
          cuda::attention(p.device_args(0, c.kv_len, out, lse), mode);
          Tensor ref, ref_lse;
          p.reference(ref, ref_lse);
          CHECK(rel_l2(p.unpad(out), ref) < gputest::tolerance(t));
          // The scores are float32 dot products of the same rounded inputs on
          // both sides: lse agrees closely whatever the storage type.
          CHECK(rel_l2(lse.to_host(ref_lse.shape()), ref_lse) < 1e-5);
        }
  if (skipped_flash) MESSAGE("flash cases skipped: this device has compute capability < 8.0");
}

TEST_CASE("cuda attention with per-sample key counts (kv_lens) matches ops::attention, with lse") {
  // Batches of 3 with key counts at 1, inside and at the end of key tiles.
  const Case cases[] = {{3, 3, 37, 65, 72, 0}, {3, 2, 70, 300, 64, 0}, {3, 2, 19, 70, 80, 5}, {3, 1, 5, 33, 128, 3}};
  for (cuda::DType t : gputest::kAllTypes)
    for (const Case& c : cases)
      for (AttentionMode mode : {AttentionMode::kFlash, AttentionMode::kMath})
        for (bool interleaved : {false, true}) {
          if (mode == AttentionMode::kFlash && !flash_runs_here(c.head_dim, t)) continue;
          CAPTURE(cuda::dtype_name(t));
          CAPTURE(c.kv_len);
          CAPTURE(c.head_dim);
          CAPTURE(mode == AttentionMode::kFlash ? "flash" : "math");
          CAPTURE(interleaved);
          const std::vector<int32_t> lens = {1, static_cast<int32_t>(c.kv_len / 2 + 1), static_cast<int32_t>(c.kv_len)};
          Problem p(c, t, interleaved);
          DeviceTensor out(c.batch * c.q_len * p.out_stride, t), lse(c.batch * c.heads * c.q_len, cuda::DType::kF32);
          cuda::AttentionArgs a = p.device_args(0, c.kv_len, out, lse);
          a.kv_lens = lens.data();  // host memory
          cuda::attention(a, mode);
          Tensor ref, ref_lse;
          p.reference(ref, ref_lse, lens.data());
          CHECK(rel_l2(p.unpad(out), ref) < gputest::tolerance(t));
          CHECK(rel_l2(lse.to_host(ref_lse.shape()), ref_lse) < 1e-5);
        }
  // Out-of-range counts are refused before anything runs.
  Problem p(Case{2, 1, 3, 4, 64, 0}, cuda::DType::kF32);
  DeviceTensor out(2 * 3 * 64, cuda::DType::kF32), lse(2 * 3, cuda::DType::kF32);
  cuda::AttentionArgs a = p.device_args(0, 4, out, lse);
  const std::vector<int32_t> bad = {4, 5};
  a.kv_lens = bad.data();
  CHECK_THROWS_AS(cuda::attention(a), std::invalid_argument);
}

TEST_CASE("cuda attention with a score bias (math path) matches ops::attention, with kv_lens and lse") {
  // T5's call (scale 1, a [heads, q_len, kv_len] bias table, here with padded
  // rows), on odd sizes; head sizes 64 and 72 have a flash kernel, which the
  // bias must keep out of the automatic choice.
  const Case cases[] = {{2, 5, 23, 23, 8, 0}, {2, 5, 70, 29, 8, 0}, {2, 5, 19, 300, 8, 3}, {2, 3, 37, 65, 64, 0},
                        {2, 2, 130, 300, 72, 5}};
  for (cuda::DType t : gputest::kAllTypes)
    for (const Case& c : cases)
      for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kMath})
        for (bool with_lens : {false, true})
          for (bool interleaved : {false, true}) {
            CAPTURE(cuda::dtype_name(t));
            CAPTURE(c.q_len);
            CAPTURE(c.kv_len);
            CAPTURE(c.head_dim);
            CAPTURE(mode == AttentionMode::kAuto ? "auto" : "math");
            CAPTURE(with_lens);
            CAPTURE(interleaved);
            Problem p(c, t, interleaved);
            p.scale = 1.0f;
            const int64_t row_stride = c.kv_len + 3, head_stride = c.q_len * row_stride;
            const Tensor table = random_tensor({c.heads * head_stride}, 13, -4, 4);
            DeviceTensor dtable(table, cuda::DType::kF32);
            const std::vector<int32_t> lens = {static_cast<int32_t>(c.kv_len / 2 + 1), static_cast<int32_t>(c.kv_len)};
            DeviceTensor out(c.batch * c.q_len * p.out_stride, t), lse(c.batch * c.heads * c.q_len, cuda::DType::kF32);
            cuda::AttentionArgs a = p.device_args(0, c.kv_len, out, lse);
            a.bias = static_cast<const float*>(dtable.data());
            a.bias_head_stride = head_stride;
            a.bias_row_stride = row_stride;
            a.kv_lens = with_lens ? lens.data() : nullptr;
            CHECK(cuda::attention_path(a, mode) == cuda::AttentionPath::kMath);
            cuda::attention(a, mode);
            AttentionArgs host_bias;
            host_bias.bias = table.data();
            host_bias.bias_head_stride = head_stride;
            host_bias.bias_row_stride = row_stride;
            Tensor ref, ref_lse;
            p.reference(ref, ref_lse, a.kv_lens, &host_bias);
            CHECK(rel_l2(p.unpad(out), ref) < gputest::tolerance(t));
            CHECK(rel_l2(lse.to_host(ref_lse.shape()), ref_lse) < 1e-5);
          }
}

TEST_CASE("cuda attention: flash refuses a score bias, forced or called directly") {
  Problem p(Case{1, 2, 5, 7, 64, 0}, cuda::DType::kBF16);
  DeviceTensor out(5 * 128, cuda::DType::kBF16), lse(2 * 5, cuda::DType::kF32);
  DeviceTensor table(Tensor::zeros({2 * 5 * 7}), cuda::DType::kF32);
  cuda::AttentionArgs a = p.device_args(0, 7, out, lse);
  a.bias = static_cast<const float*>(table.data());
  a.bias_head_stride = 5 * 7;
  a.bias_row_stride = 7;
  CHECK_THROWS_AS(cuda::attention(a, AttentionMode::kFlash), std::invalid_argument);
  CHECK_THROWS_AS(cuda::attention_path(a, AttentionMode::kFlash), std::invalid_argument);
  CHECK_THROWS_AS(cuda::attention_flash(a), std::invalid_argument);
  CHECK(cuda::attention_path(a) == cuda::AttentionPath::kMath);
}

TEST_CASE("cuda attention merged over key blocks by lse equals attention over all keys") {
  const Case c{2, 3, 37, 29, 72, 0};
  for (cuda::DType t : gputest::kAllTypes)
    for (AttentionMode mode : {AttentionMode::kFlash, AttentionMode::kMath}) {
      if (mode == AttentionMode::kFlash && !flash_runs_here(c.head_dim, t)) continue;
      CAPTURE(cuda::dtype_name(t));
      CAPTURE(mode == AttentionMode::kFlash ? "flash" : "math");
      Problem p(c, t);
      const int64_t out_n = c.batch * c.q_len * p.out_stride, lse_n = c.batch * c.heads * c.q_len;
      DeviceTensor acc(out_n, t), acc_lse(lse_n, cuda::DType::kF32);
      DeviceTensor part(out_n, t), part_lse(lse_n, cuda::DType::kF32);
      cuda::attention(p.device_args(0, 10, acc, acc_lse), mode);
      for (auto [k0, k1] : {std::pair<int64_t, int64_t>{10, 13}, {13, c.kv_len}}) {
        cuda::attention(p.device_args(k0, k1, part, part_lse), mode);
        cuda::attention_merge_(acc.data(), static_cast<float*>(acc_lse.data()), part.data(),
                               static_cast<const float*>(part_lse.data()), c.batch, c.heads, c.q_len, c.head_dim,
                               p.out_stride, c.q_len * p.out_stride, t);
      }
      Tensor ref, ref_lse;
      p.reference(ref, ref_lse);
      CHECK(rel_l2(p.unpad(acc), ref) < gputest::tolerance(t));
      CHECK(rel_l2(acc_lse.to_host(ref_lse.shape()), ref_lse) < 1e-5);
    }
}

TEST_CASE("cuda attention: the automatic path is attention_path.h's choice, impossible flash is refused") {
  const cuda::DeviceInfo& info = cuda::current_device_info();
  for (cuda::DType t : gputest::kAllTypes)
    for (int64_t d : {64, 72, 128, 80, 40}) {
      Problem p(Case{1, 1, 3, 3, d, 0}, t);
      DeviceTensor out(3 * d, t), lse(3, cuda::DType::kF32);
      const cuda::AttentionArgs a = p.device_args(0, 3, out, lse);
      CHECK(cuda::attention_path(a) == cuda::choose_attention_path(info.major, info.minor, static_cast<int>(d), t));
      CHECK(cuda::attention_path(a, AttentionMode::kMath) == cuda::AttentionPath::kMath);
      if (!flash_runs_here(d, t)) CHECK_THROWS_AS(cuda::attention(a, AttentionMode::kFlash), std::invalid_argument);
    }
}
