// cuDNN's fused flash attention (kernels/cuda/attention_cudnn.cpp) against
// ops::attention on the CPU, ggml test-backend-ops style: bf16 and f16, the
// families' head sizes 64, 72 and 128, self-attention reading q/k/v out of
// one packed projection row ([q | k | v] per token, as the models'
// fused qkv linear writes them), contiguous and interleaved batches
// (temporal attention's layout), cross-attention with per-sample key counts
// (cuDNN's padding mask), the log-sum-exp output (ring attention), plans
// cached per shape, and the dispatch: attention() takes cuDNN where the
// pure rule of attention_path.h says so and the own flash kernel for
// operands cuDNN cannot address. Tolerances: gpu_test_helpers.h.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/gpu_skip.h"
#include "gpu/gpu_test_helpers.h"
#include "ops/ops.h"

using namespace ditgen;
using gputest::DeviceTensor;
using testing::random_tensor;
using testing::rel_l2;

namespace {

bool cudnn_expected() {
  const cuda::DeviceInfo& info = cuda::current_device_info();
  return cuda::compute_capability_at_least(info.major, info.minor, 8, 0);
}

// Skips (gpu_skip.h: ctest reports it as skipped, not passed) where cuDNN
// attention is not expected to run; fails where it should but libcudnn did
// not load (the device session must make it loadable: scripts/gpu/check.sh
// puts its directory on LD_LIBRARY_PATH).
bool cudnn_here() {
  if (!cudnn_expected()) {
    gputest::skip_test("compute capability below 8.0: no cuDNN attention, nothing to check");
    return false;
  }
#ifdef DITGEN_WITH_CUDNN_SDPA
  const char* off = std::getenv("DITGEN_CUDNN_ATTENTION");
  if (off && std::string(off) == "0") {
    gputest::skip_test("DITGEN_CUDNN_ATTENTION=0: cuDNN attention switched off");
    return false;
  }
  INFO("cuDNN attention: " << cuda::cudnn_attention_status());
  CHECK(cuda::cudnn_attention_available());
  return cuda::cudnn_attention_available();
#else
  gputest::skip_test("built without cudnn-frontend: " + std::string(cuda::cudnn_attention_status()));
  return false;
#endif
}

struct SdpaCase {
  int64_t batch, heads, q_len, kv_len, head_dim;
  bool cross;        // q from its own tensor, k/v from [B, kv_len, 2 * inner]
  bool interleaved;  // token rows of the batch interleaved: batch stride one row
  bool masked;       // per-sample key counts (cross only)
};

struct Sdpa {
  SdpaCase c;
  cuda::DType t;
  int64_t inner, q_stride, kv_stride, k_off, v_off;
  Tensor q, kv;  // host, rounded; self: q == kv (packed [q | k | v])
  DeviceTensor dq, dkv;
  std::vector<int32_t> kv_lens;

  Sdpa(SdpaCase c_, cuda::DType t_)
      : c(c_), t(t_), inner(c.heads * c.head_dim), q_stride(c.cross ? inner : 3 * inner),
        kv_stride(c.cross ? 2 * inner : 3 * inner), k_off(c.cross ? 0 : inner), v_off(c.cross ? inner : 2 * inner),
        q(gputest::rounded(random_tensor({c.batch, c.q_len, q_stride}, 21, -2, 2), t)),
        kv(c.cross ? gputest::rounded(random_tensor({c.batch, c.kv_len, kv_stride}, 22, -2, 2), t) : q),
        dq(q, t), dkv(kv, t) {
    for (int64_t b = 0; b < c.batch; ++b)
      kv_lens.push_back(c.masked ? static_cast<int32_t>(std::max<int64_t>(1, c.kv_len - 5 * b - (b % 2) * 3))
                                 : static_cast<int32_t>(c.kv_len));
  }

  int64_t row(int64_t stride) const { return c.interleaved ? c.batch * stride : stride; }
  int64_t bat(int64_t stride, int64_t len) const { return c.interleaved ? stride : len * stride; }

  template <class Args>
  void fill(Args& a, const void* qp, const void* kvp_k, const void* kvp_v) const {
    a.q = qp, a.k = kvp_k, a.v = kvp_v;
    a.batch = c.batch, a.heads = c.heads, a.q_len = c.q_len, a.kv_len = c.kv_len, a.head_dim = c.head_dim;
    a.q_row_stride = row(q_stride), a.k_row_stride = a.v_row_stride = row(kv_stride);
    a.q_batch_stride = bat(q_stride, c.q_len), a.k_batch_stride = a.v_batch_stride = bat(kv_stride, c.kv_len);
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    a.kv_lens = c.masked ? kv_lens.data() : nullptr;
  }

  cuda::AttentionArgs device_args(DeviceTensor& out, DeviceTensor* lse) {
    cuda::AttentionArgs a;
    fill(a, dq.data(), dkv.at(k_off), dkv.at(v_off));
    a.dtype = t;
    a.out = out.data();
    a.out_row_stride = inner, a.out_batch_stride = c.q_len * inner;  // [B, q_len, inner]
    a.lse = lse ? static_cast<float*>(lse->data()) : nullptr;
    return a;
  }

  void reference(Tensor& out, Tensor& lse) const {
    out = Tensor::empty({c.batch, c.q_len, inner});
    lse = Tensor::empty({c.batch, c.heads, c.q_len});
    ops::AttentionArgs a;
    fill(a, q.data(), kv.data() + k_off, kv.data() + v_off);
    a.out = out.data(), a.lse = lse.data();
    a.out_row_stride = inner, a.out_batch_stride = c.q_len * inner;
    ops::attention(a);
  }
};

const SdpaCase kSdpaCases[] = {
    // self-attention: DiT/PixArt/Latte spatial (72), Wan (128), the toys (64)
    {2, 3, 37, 37, 72, false, false, false},
    {2, 2, 130, 130, 64, false, false, false},
    {1, 2, 70, 70, 128, false, false, false},
    {1, 1, 1, 1, 64, false, false, false},
    // Latte's temporal attention: 16 frames per token, batches interleaved
    {12, 2, 16, 16, 72, false, true, false},
    // cross-attention to 120 text tokens, with and without per-sample counts
    {3, 2, 37, 120, 72, true, false, false},
    {3, 2, 37, 120, 72, true, false, true},
    {2, 2, 65, 13, 128, true, false, true},
    {4, 1, 33, 77, 64, true, false, true},
};

}  // namespace

TEST_CASE("cuDNN attention matches ops::attention (bf16 and f16, head sizes 64/72/128, self, cross, masked, lse)") {
  if (!cudnn_here()) return;
  for (cuda::DType t : {cuda::DType::kBF16, cuda::DType::kF16})
    for (const SdpaCase& c : kSdpaCases)
      for (bool with_lse : {false, true}) {
        CAPTURE(cuda::dtype_name(t));
        CAPTURE(c.batch);
        CAPTURE(c.heads);
        CAPTURE(c.q_len);
        CAPTURE(c.kv_len);
        CAPTURE(c.head_dim);
        CAPTURE(c.cross);
        CAPTURE(c.interleaved);
        CAPTURE(c.masked);
        CAPTURE(with_lse);
        Sdpa p(c, t);
        DeviceTensor out(c.batch * c.q_len * p.inner, t), lse(c.batch * c.heads * c.q_len, cuda::DType::kF32);
        const cuda::AttentionArgs a = p.device_args(out, with_lse ? &lse : nullptr);
        REQUIRE(cuda::cudnn_sdpa_operands_aligned(a));
        const bool ran = cuda::attention_cudnn(a);
        CHECK(ran);  // every case here is one cuDNN should have a plan for
        if (!ran) continue;
        Tensor ref, ref_lse;
        p.reference(ref, ref_lse);
        CHECK(rel_l2(out.to_host({c.batch, c.q_len, p.inner}), ref) < gputest::tolerance(t));
        if (with_lse) CHECK(rel_l2(lse.to_host({c.batch, c.heads, c.q_len}), ref_lse) < 1e-4);
      }
  const cuda::CudnnAttentionStats s = cuda::cudnn_attention_stats();
  MESSAGE("cuDNN attention graphs: " << s.graphs << " keys, " << s.builds << " builds, " << s.hits << " hits");
}

TEST_CASE("cuDNN attention: one graph per shape, reused across calls and key-length values") {
  if (!cudnn_here()) return;
  const cuda::DType t = cuda::DType::kBF16;
  Sdpa p({2, 2, 40, 24, 72, true, false, true}, t);
  DeviceTensor out(2 * 40 * p.inner, t);
  cuda::AttentionArgs a = p.device_args(out, nullptr);
  REQUIRE(cuda::attention_cudnn(a));
  const cuda::CudnnAttentionStats first = cuda::cudnn_attention_stats();
  std::vector<int32_t> other = {3, 24};
  a.kv_lens = other.data();
  for (int i = 0; i < 4; ++i) REQUIRE(cuda::attention_cudnn(a));
  const cuda::CudnnAttentionStats later = cuda::cudnn_attention_stats();
  CHECK(later.builds == first.builds);
  CHECK(later.hits >= first.hits + 4);
  // The other key lengths took effect: the same result as the CPU with them.
  p.kv_lens = other;
  Tensor ref, ref_lse;
  p.reference(ref, ref_lse);
  CHECK(rel_l2(out.to_host({2, 40, p.inner}), ref) < gputest::tolerance(t));
}

TEST_CASE("attention() takes cuDNN where the rule says so, the own kernels for what cuDNN cannot address") {
  if (!cudnn_here()) return;
  for (cuda::DType t : {cuda::DType::kBF16, cuda::DType::kF16}) {
    CAPTURE(cuda::dtype_name(t));
    Sdpa p({2, 2, 37, 37, 72, false, false, false}, t);
    DeviceTensor out(2 * 37 * p.inner, t);
    cuda::AttentionArgs a = p.device_args(out, nullptr);
    CHECK(cuda::attention_path(a) == cuda::AttentionPath::kCudnn);
    CHECK(cuda::attention_path(a, AttentionMode::kFlash) == cuda::AttentionPath::kCudnn);
    CHECK(cuda::attention_path(a, AttentionMode::kMath) == cuda::AttentionPath::kMath);
    cuda::attention(a);
    Tensor ref, ref_lse;
    p.reference(ref, ref_lse);
    CHECK(rel_l2(out.to_host({2, 37, p.inner}), ref) < gputest::tolerance(t));
    // An output row stride of inner + 1 elements: not 16-byte aligned, so the
    // own flash kernel runs (and cuDNN refuses the call outright).
    DeviceTensor padded(2 * 37 * (p.inner + 1), t);
    cuda::AttentionArgs b = a;
    b.out = padded.data();
    b.out_row_stride = p.inner + 1;
    b.out_batch_stride = 37 * (p.inner + 1);
    CHECK_FALSE(cuda::cudnn_sdpa_operands_aligned(b));
    CHECK(cuda::attention_path(b) == cuda::AttentionPath::kFlash);
    CHECK_FALSE(cuda::attention_cudnn(b));
    cuda::attention(b);
    Tensor got = padded.to_host({2, 37, p.inner + 1});
    Tensor unpadded = Tensor::empty({2, 37, p.inner});
    for (int64_t r = 0; r < 2 * 37; ++r)
      for (int64_t e = 0; e < p.inner; ++e) unpadded[r * p.inner + e] = got[r * (p.inner + 1) + e];
    CHECK(rel_l2(unpadded, ref) < gputest::tolerance(t));
    // float32 has no cuDNN form: the own flash kernel.
    cuda::AttentionArgs f = a;
    f.dtype = cuda::DType::kF32;
    CHECK(cuda::attention_path(f) == cuda::AttentionPath::kFlash);
  }
}
