// Backend parity of the op front end (src/ops/ops.h), in the style of
// ggml's test-backend-ops: every op is run through ops:: twice, once on CPU
// float32 tensors (the reference, src/ops/cpu) and once on CUDA tensors of
// each storage type (src/ops/gpu), from the same inputs: random values
// rounded to the storage type on the CPU (gputest::rounded) and uploaded
// with Tensor::to(Device::kCUDA, dtype). Results come back through
// Tensor::to_vector() and are compared by relative L2 with the per-dtype
// tolerance of gpu_test_helpers.h (float32 1e-5, float16 2e-3, bfloat16
// 1e-2); pure data movement (Tensor::to / copy_from round trips, copy_rows,
// gather_rows, upsample_nearest, patchify, unpatchify, patchify3d,
// unpatchify3d) must be exact. Shapes are odd on purpose (no multiple of a
// tile or vector width).
// Unlike the other tests/gpu files, which call kernels/cuda directly, this
// goes through the same dispatch and argument checks the models use.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/gpu_test_helpers.h"
#include "ops/backend.h"
#include "ops/ops.h"

using namespace ditgen;
using testing::random_tensor;

namespace {

constexpr Device kCUDA = Device::kCUDA;

// Host (CPU float32) values rounded to t: what the CUDA tensor will hold.
Tensor input(Shape shape, uint32_t seed, DType t, float lo = -1.0f, float hi = 1.0f) {
  return gputest::rounded(random_tensor(std::move(shape), seed, lo, hi), t);
}

Tensor up(const Tensor& host, DType t) { return host.to(kCUDA, t); }

// For CAPTURE (doctest prints a const char* as a pointer).
std::string dtype_str(DType t) { return dtype_name(t); }

// A CUDA result of dtype t against the CPU float32 reference.
void check_close(const Tensor& got, const Tensor& ref, DType t) {
  REQUIRE(got.device() == kCUDA);
  CHECK(got.dtype() == t);
  REQUIRE(got.shape() == ref.shape());
  const std::vector<float> g = got.to_vector();
  const double err = testing::rel_l2(g.data(), ref.data(), ref.numel());
  CAPTURE(err);
  CHECK(err < gputest::tolerance(t));
}

// Exact equality of a CUDA (or CPU) tensor's values with a CPU tensor's.
void check_equal(const Tensor& got, const Tensor& ref) {
  REQUIRE(got.shape() == ref.shape());
  const std::vector<float> g = got.to_vector();
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < ref.numel(); ++i)
    if (!(g[i] == ref[i])) {
      if (first < 0) first = i;
      ++differ;
    }
  CAPTURE(first);
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("backend ops: Tensor::to and copy_from round trips CPU <-> CUDA are exact for every dtype") {
  const Tensor x = random_tensor({5, 7, 13}, 1, -3, 3);
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    const Tensor want = gputest::rounded(x, t);
    const Tensor d = x.to(kCUDA, t);
    CHECK(d.device() == kCUDA);
    CHECK(d.dtype() == t);
    CHECK(d.shape() == x.shape());
    CHECK(d.nbytes() == static_cast<size_t>(x.numel()) * dtype_size(t));
    check_equal(d, want);

    // Back to the host as float32, and a no-op to() that shares storage.
    const Tensor back = d.to(Device::kCPU);
    CHECK(back.is_cpu());
    CHECK(back.dtype() == DType::kF32);
    check_equal(back, want);
    CHECK(d.to(kCUDA, t).raw() == d.raw());
    CHECK(d.to(kCUDA).raw() == d.raw());  // to(device) keeps the dtype on the same device

    // Host element access on a CUDA tensor is a clear error.
    CHECK_THROWS_AS((void)d.data(), std::logic_error);

    // copy_from: CPU -> CUDA (another shape, same numel), CUDA -> CPU.
    Tensor dst = Tensor::zeros({7, 5, 13}, kCUDA, t);
    dst.copy_from(x);
    CHECK(dst.shape() == Shape{7, 5, 13});
    check_equal(dst.reshape(x.shape()), want);
    Tensor host = Tensor::zeros(x.shape());
    host.copy_from(dst);
    check_equal(host, want);

    // CUDA -> CUDA conversions through every other dtype: the value is
    // rounded once per step, exactly as on the host.
    for (DType u : gputest::kAllTypes) {
      CAPTURE(dtype_str(u));
      Tensor twice = x.clone();
      for (int64_t i = 0; i < twice.numel(); ++i)
        twice[i] = gputest::round_trip(gputest::round_trip(x[i], t), u);
      check_equal(d.to(kCUDA, u), twice);
      Tensor dst_u = Tensor::empty({x.numel()}, kCUDA, u);
      dst_u.copy_from(d);
      check_equal(dst_u.reshape(x.shape()), twice);
    }

    // clone() is deep; slice0() and reshape() are views of the same storage.
    Tensor c = d.clone();
    CHECK(c.raw() != d.raw());
    Tensor ones = Tensor::full(x.shape(), 1.0f).to(kCUDA, t);
    ops::add_(ones, c);  // changes `ones`, not c or d
    check_equal(c, want);
    check_equal(d, want);
    const Tensor rows = d.slice0(1, 4);
    CHECK(rows.raw() == d.raw_at(7 * 13));
    check_equal(rows, want.slice0(1, 4).clone());
    check_equal(d.reshape({35, 13}), want.reshape({35, 13}));
  }
}

TEST_CASE("backend ops: the front end refuses operands on different devices or dtypes") {
  const Tensor x = random_tensor({3, 9}, 2);
  Tensor cpu = x.clone();
  Tensor f32 = x.to(kCUDA, DType::kF32), bf16 = x.to(kCUDA, DType::kBF16);
  CHECK_THROWS_AS(ops::add_(f32, cpu), std::invalid_argument);
  CHECK_THROWS_AS(ops::add_(cpu, f32), std::invalid_argument);
  CHECK_THROWS_AS(ops::add_(bf16, f32), std::invalid_argument);
  const Tensor w = random_tensor({4, 9}, 3);
  CHECK_THROWS_AS(ops::linear(bf16, w.to(kCUDA, DType::kF16), nullptr), std::invalid_argument);
  CHECK_THROWS_AS(ops::linear(f32, w, nullptr), std::invalid_argument);
  Tensor out = Tensor::empty({3, 9}, kCUDA, DType::kF16);
  CHECK_THROWS_AS(ops::copy_rows(bf16, 0, 9, out, 0, 9, 3, 9), std::invalid_argument);
}

TEST_CASE("backend ops: gemm, all four transpose combinations") {
  struct Dims {
    int64_t m, n, k;
  };
  for (DType t : gputest::kAllTypes)
    for (Dims s : {Dims{37, 29, 53}, Dims{1, 29, 53}, Dims{37, 1, 17}, Dims{5, 3, 1}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          CAPTURE(dtype_str(t));
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(ta);
          CAPTURE(tb);
          const Tensor a = input(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 11, t);
          const Tensor b = input(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 12, t);
          const Tensor c = input({s.m, s.n}, 13, t);
          Tensor ref = c.clone();
          ops::gemm(ta, tb, 0.7f, a, b, 0.3f, ref);
          Tensor dc = up(c, t);
          ops::gemm(ta, tb, 0.7f, up(a, t), up(b, t), 0.3f, dc);
          check_close(dc, ref, t);
          // beta = 0 ignores whatever c held.
          Tensor ref0 = c.clone(), dc0 = up(c, t);
          ops::gemm(ta, tb, 1.0f, a, b, 0.0f, ref0);
          ops::gemm(ta, tb, 1.0f, up(a, t), up(b, t), 0.0f, dc0);
          check_close(dc0, ref0, t);
        }
}

TEST_CASE("backend ops: linear and linear_into (column offset into a wider y)") {
  const int64_t n = 29, k = 53;
  for (DType t : gputest::kAllTypes)
    for (Shape xs : {Shape{3, 7, k}, Shape{1, k}, Shape{2, 1, k}})
      for (bool with_bias : {true, false}) {
        CAPTURE(dtype_str(t));
        CAPTURE(shape_str(xs));
        CAPTURE(with_bias);
        const Tensor x = input(xs, 21, t), w = input({n, k}, 22, t), bias = input({n}, 23, t);
        const Tensor dx = up(x, t), dw = up(w, t), db = up(bias, t);
        const Tensor ref = ops::linear(x, w, with_bias ? &bias : nullptr);
        const Tensor got = ops::linear(dx, dw, with_bias ? &db : nullptr);
        Shape ys = xs;
        ys.back() = n;
        CHECK(got.shape() == ys);
        check_close(got, ref, t);

        // Columns [5, 5 + n) of a [rows, n + 12] buffer; the rest untouched.
        const int64_t rows = x.numel() / k, width = n + 12, col = 5;
        const Tensor y0 = input({rows, width}, 24, t);
        Tensor yref = y0.clone();
        ops::linear_into(x, w, with_bias ? &bias : nullptr, yref, col);
        Tensor dy = up(y0, t);
        ops::linear_into(dx, dw, with_bias ? &db : nullptr, dy, col);
        check_close(dy, yref, t);
        const std::vector<float> g = dy.to_vector();
        int64_t touched = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < width; ++j)
            if ((j < col || j >= col + n) && !(g[r * width + j] == y0[r * width + j])) ++touched;
        CHECK(touched == 0);
      }
}

TEST_CASE("backend ops: silu, silu_, gelu_tanh_, add_, add_broadcast_") {
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    const Tensor x = input({3, 1001}, 31, t, -6, 6);
    const Tensor dx = up(x, t);

    const Tensor ref_silu = ops::silu(x);
    check_close(ops::silu(dx), ref_silu, t);
    check_equal(dx, x);  // out of place: the input is unchanged

    Tensor s = up(x, t);
    ops::silu_(s);
    check_close(s, ref_silu, t);

    Tensor gref = x.clone(), g = up(x, t);
    ops::gelu_tanh_(gref);
    ops::gelu_tanh_(g);
    check_close(g, gref, t);

    const Tensor a = input({5, 333}, 32, t, -2, 2), b = input({5, 333}, 33, t, -2, 2);
    Tensor aref = a.clone(), da = up(a, t);
    ops::add_(aref, b);
    ops::add_(da, up(b, t));
    check_close(da, aref, t);

    // A bias over every token, and a [tokens, C] table over every sample.
    for (Shape ys : {Shape{45}, Shape{7, 45}}) {
      CAPTURE(shape_str(ys));
      const Tensor base = input({4, 7, 45}, 34, t, -2, 2), y = input(ys, 35, t, -2, 2);
      Tensor ref = base.clone(), got = up(base, t);
      ops::add_broadcast_(ref, y);
      ops::add_broadcast_(got, up(y, t));
      check_close(got, ref, t);
    }
  }
}

TEST_CASE("backend ops: layer_norm (with and without affine), layer_norm_modulate, gated_residual_") {
  const int64_t b = 3, n = 7, c = 45;
  const int64_t m = 3 * c + 5;                                // modulation row: [pad | shift | scale | gate | pad]
  const int64_t shift_col = 2, scale_col = shift_col + c + 1, gate_col = scale_col + c + 1;
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    const Tensor x = input({b, n, c}, 41, t, -3, 5), w = input({c}, 42, t), bias = input({c}, 43, t);
    const Tensor dx = up(x, t), dw = up(w, t), db = up(bias, t);
    struct Affine {
      bool weight, bias;
    };
    for (Affine a : {Affine{true, true}, Affine{false, false}, Affine{true, false}})
      for (float eps : {1e-5f, 1e-6f}) {
        CAPTURE(a.weight);
        CAPTURE(a.bias);
        CAPTURE(eps);
        const Tensor ref = ops::layer_norm(x, a.weight ? &w : nullptr, a.bias ? &bias : nullptr, eps);
        check_close(ops::layer_norm(dx, a.weight ? &dw : nullptr, a.bias ? &db : nullptr, eps), ref, t);
      }
    // A 2-D input with one odd row length.
    const Tensor x2 = input({5, 333}, 44, t, -1, 3);
    check_close(ops::layer_norm(up(x2, t), nullptr, nullptr, 1e-6f), ops::layer_norm(x2, nullptr, nullptr, 1e-6f), t);

    const Tensor mod = input({b, m}, 45, t), dmod = up(mod, t);
    Tensor ref = Tensor::empty({b, n, c});
    ops::layer_norm_modulate(x, mod, shift_col, scale_col, 1e-6f, ref);
    Tensor got = Tensor::empty({b, n, c}, kCUDA, t);
    ops::layer_norm_modulate(dx, dmod, shift_col, scale_col, 1e-6f, got);
    check_close(got, ref, t);

    const Tensor y = input({b, n, c}, 46, t, -2, 2);
    Tensor rref = x.clone(), rgot = up(x, t);
    ops::gated_residual_(rref, y, mod, gate_col);
    ops::gated_residual_(rgot, up(y, t), dmod, gate_col);
    check_close(rgot, rref, t);
  }
}

TEST_CASE("backend ops: rms_norm, relu_, mul_ (the T5 encoder's)") {
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    for (Shape xs : {Shape{3, 7, 40}, Shape{5, 37}, Shape{2, 333}}) {
      CAPTURE(shape_str(xs));
      const Tensor x = input(xs, 47, t, -3, 5), w = input({xs.back()}, 48, t, 0.5f, 2.0f);
      check_close(ops::rms_norm(up(x, t), up(w, t), 1e-6f), ops::rms_norm(x, w, 1e-6f), t);
    }
    CHECK_THROWS_AS(ops::rms_norm(up(input({3, 40}, 49, t), t), up(input({39}, 49, t), t), 1e-6f),
                    std::invalid_argument);

    const Tensor a = input({5, 333}, 36, t, -2, 2), b = input({5, 333}, 37, t, -2, 2);
    Tensor ref = a.clone(), got = up(a, t);
    ops::relu_(ref);
    ops::relu_(got);
    check_equal(got, ref);  // max(x, 0) of a stored value: exact
    ops::mul_(ref, b);
    ops::mul_(got, up(b, t));
    check_close(got, ref, t);
    Tensor other = up(input({333, 5}, 38, t), t);
    CHECK_THROWS_AS(ops::mul_(got, other), std::invalid_argument);
  }
}

TEST_CASE("backend ops: group_norm with and without fused SiLU") {
  struct Case {
    Shape shape;
    int64_t groups;
  };
  for (DType t : gputest::kAllTypes)
    for (const Case& k : {Case{{2, 12, 5, 7}, 4}, Case{{2, 12, 5, 7}, 3}, Case{{1, 12, 3, 3}, 12},
                          Case{{2, 8, 33}, 2}, Case{{3, 6, 9, 11}, 1}})
      for (bool fuse : {false, true}) {
        CAPTURE(dtype_str(t));
        CAPTURE(shape_str(k.shape));
        CAPTURE(k.groups);
        CAPTURE(fuse);
        const int64_t ch = k.shape[1];
        const Tensor x = input(k.shape, 51, t, -2, 3), w = input({ch}, 52, t), bias = input({ch}, 53, t);
        const Tensor ref = ops::group_norm(x, k.groups, w, bias, 1e-6f, fuse);
        check_close(ops::group_norm(up(x, t), k.groups, up(w, t), up(bias, t), 1e-6f, fuse), ref, t);
      }
}

namespace {

// Attention over keys [k0, k1) of a packed projection output qkv
// [B, N, 3 * inner] (q | k | v per token row), on whatever device qkv is;
// out [B, N, inner], lse float32 [B, heads, N] (optional).
ops::AttentionArgs packed_args(Tensor& qkv, Tensor& out, Tensor* lse, int64_t heads, int64_t head_dim, int64_t k0,
                               int64_t k1) {
  const int64_t b = qkv.dim(0), n = qkv.dim(1), inner = heads * head_dim, row = 3 * inner;
  ops::AttentionArgs a;
  a.device = qkv.device();
  a.dtype = qkv.dtype();
  a.q = qkv.raw_at(0);
  a.k = qkv.raw_at(k0 * row + inner);
  a.v = qkv.raw_at(k0 * row + 2 * inner);
  a.out = out.raw();
  a.lse = lse ? static_cast<float*>(lse->raw()) : nullptr;
  a.batch = b, a.heads = heads, a.q_len = n, a.kv_len = k1 - k0, a.head_dim = head_dim;
  a.q_row_stride = a.k_row_stride = a.v_row_stride = row;
  a.out_row_stride = inner;
  a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = n * row;
  a.out_batch_stride = n * inner;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return a;
}

const char* mode_name(AttentionMode m) {
  return m == AttentionMode::kMath ? "math" : m == AttentionMode::kFlash ? "flash" : "auto";
}

// Restores the process-wide attention mode when a test case ends.
struct ModeGuard {
  AttentionMode saved = ops::attention_mode();
  ~ModeGuard() { ops::set_attention_mode(saved); }
};

}  // namespace

TEST_CASE("backend ops: attention from packed q|k|v rows, with lse, and attention_merge_") {
  struct Case {
    int64_t batch, heads, tokens, head_dim;
  };
  const Case cases[] = {
      {2, 3, 37, 72},   // partial tiles, head size 72
      {1, 12, 25, 8},   // the dit_odd fixture's shape (5x5 tokens, 12 heads of 8)
      {2, 4, 64, 32},   // the default model's shape (8x8 tokens, 4 heads of 32)
      {1, 2, 130, 64},  // several query and key tiles
      {3, 2, 19, 40},   // a head size without a flash kernel
      {1, 1, 1, 64},    // one token
  };
  ModeGuard guard;
  for (DType t : gputest::kAllTypes)
    for (const Case& c : cases)
      for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kMath}) {
        ops::set_attention_mode(mode);
        CAPTURE(dtype_str(t));
        CAPTURE(c.batch);
        CAPTURE(c.heads);
        CAPTURE(c.tokens);
        CAPTURE(c.head_dim);
        CAPTURE(std::string(mode_name(mode)));
        const std::string path = ops::cuda_attention_path(c.head_dim, t);
        CAPTURE(path);
        const int64_t inner = c.heads * c.head_dim;
        Tensor qkv = input({c.batch, c.tokens, 3 * inner}, 61, t, -2, 2);
        Tensor ref = Tensor::empty({c.batch, c.tokens, inner});
        Tensor ref_lse = Tensor::empty({c.batch, c.heads, c.tokens});
        ops::attention(packed_args(qkv, ref, &ref_lse, c.heads, c.head_dim, 0, c.tokens));

        Tensor dqkv = up(qkv, t);
        Tensor out = Tensor::empty({c.batch, c.tokens, inner}, kCUDA, t);
        Tensor lse = Tensor::empty({c.batch, c.heads, c.tokens}, kCUDA, DType::kF32);
        ops::attention(packed_args(dqkv, out, &lse, c.heads, c.head_dim, 0, c.tokens));
        check_close(out, ref, t);
        // Scores are float32 dot products of the same rounded inputs: the
        // log-sum-exp agrees closely whatever the storage type.
        check_close(lse, ref_lse, DType::kF32);

        // Without lse.
        Tensor out2 = Tensor::empty({c.batch, c.tokens, inner}, kCUDA, t);
        ops::attention(packed_args(dqkv, out2, nullptr, c.heads, c.head_dim, 0, c.tokens));
        check_close(out2, ref, t);

        // Ring attention: keys [0, s) and [s, N) merged by lse equal all keys.
        if (c.tokens >= 2) {
          const int64_t s = c.tokens / 3 + 1;
          Tensor acc = Tensor::empty({c.batch, c.tokens, inner}, kCUDA, t);
          Tensor acc_lse = Tensor::empty({c.batch, c.heads, c.tokens}, kCUDA, DType::kF32);
          Tensor part = Tensor::empty({c.batch, c.tokens, inner}, kCUDA, t);
          Tensor part_lse = Tensor::empty({c.batch, c.heads, c.tokens}, kCUDA, DType::kF32);
          ops::attention(packed_args(dqkv, acc, &acc_lse, c.heads, c.head_dim, 0, s));
          ops::attention(packed_args(dqkv, part, &part_lse, c.heads, c.head_dim, s, c.tokens));
          ops::attention_merge_(acc, acc_lse, part, part_lse, c.heads);
          check_close(acc, ref, t);
          check_close(acc_lse, ref_lse, DType::kF32);

          // The same split and merge on the CPU: the two merges agree too.
          Tensor cacc = Tensor::empty({c.batch, c.tokens, inner}), cacc_lse = Tensor::empty({c.batch, c.heads, c.tokens});
          Tensor cpart = Tensor::empty({c.batch, c.tokens, inner}), cpart_lse = Tensor::empty({c.batch, c.heads, c.tokens});
          ops::attention(packed_args(qkv, cacc, &cacc_lse, c.heads, c.head_dim, 0, s));
          ops::attention(packed_args(qkv, cpart, &cpart_lse, c.heads, c.head_dim, s, c.tokens));
          ops::attention_merge_(cacc, cacc_lse, cpart, cpart_lse, c.heads);
          check_close(acc, cacc, t);
        }
      }
}

TEST_CASE("backend ops: attention with a score bias (T5), every mode") {
  // T5 self-attention: scale 1 and a [heads, N, N] relative-position bias,
  // the same for every sample. auto and math take the math path; a forced
  // flash path is refused (the flash kernel adds no bias).
  const int64_t batch = 2, heads = 3, tokens = 37, head_dim = 64, inner = heads * head_dim;
  ModeGuard guard;
  const Tensor table = random_tensor({heads, tokens, tokens}, 62, -4, 4);
  const Tensor dtable = table.to(kCUDA, DType::kF32);
  auto with_bias = [&](ops::AttentionArgs a, const Tensor& bias) {
    a.scale = 1.0f;
    a.bias = static_cast<const float*>(bias.raw());
    a.bias_head_stride = tokens * tokens;
    a.bias_row_stride = tokens;
    return a;
  };
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    Tensor qkv = input({batch, tokens, 3 * inner}, 63, t, -1, 1);
    Tensor ref = Tensor::empty({batch, tokens, inner}), ref_lse = Tensor::empty({batch, heads, tokens});
    ops::attention(with_bias(packed_args(qkv, ref, &ref_lse, heads, head_dim, 0, tokens), table));
    Tensor dqkv = up(qkv, t);
    for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kMath, AttentionMode::kFlash}) {
      CAPTURE(std::string(mode_name(mode)));
      ops::set_attention_mode(mode);
      Tensor out = Tensor::empty({batch, tokens, inner}, kCUDA, t);
      Tensor lse = Tensor::empty({batch, heads, tokens}, kCUDA, DType::kF32);
      const ops::AttentionArgs a = with_bias(packed_args(dqkv, out, &lse, heads, head_dim, 0, tokens), dtable);
      if (mode == AttentionMode::kFlash) {
        CHECK_THROWS_AS(ops::attention(a), std::invalid_argument);
        continue;
      }
      ops::attention(a);
      check_close(out, ref, t);
      check_close(lse, ref_lse, DType::kF32);
    }
  }
}

TEST_CASE("backend ops: conv2d (stride 1 and 2, padding 0 and 1, 3x3 and 1x1 kernels)") {
  struct Case {
    Shape x, w;
    int64_t stride, padding;
    bool bias;
  };
  const Case cases[] = {
      {{2, 5, 11, 9}, {7, 5, 3, 3}, 1, 1, true},  {{2, 5, 11, 9}, {7, 5, 3, 3}, 1, 0, true},
      {{2, 5, 11, 9}, {7, 5, 3, 3}, 2, 1, false}, {{2, 5, 11, 9}, {7, 5, 3, 3}, 2, 0, true},
      {{1, 6, 7, 13}, {3, 6, 1, 1}, 1, 0, true},  {{3, 4, 8, 8}, {5, 4, 4, 4}, 2, 1, true},
      {{1, 3, 3, 3}, {2, 3, 3, 3}, 1, 0, false},
  };
  for (DType t : gputest::kAllTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_str(t));
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.w));
      CAPTURE(c.stride);
      CAPTURE(c.padding);
      CAPTURE(c.bias);
      const Tensor x = input(c.x, 71, t), w = input(c.w, 72, t), bias = input({c.w[0]}, 73, t);
      const Tensor db = up(bias, t);
      const Tensor ref = ops::conv2d(x, w, c.bias ? &bias : nullptr, c.stride, c.padding);
      check_close(ops::conv2d(up(x, t), up(w, t), c.bias ? &db : nullptr, c.stride, c.padding), ref, t);
    }
}

TEST_CASE("backend ops: upsample_nearest, patchify and unpatchify are exact") {
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    const Tensor x = input({2, 3, 5, 7}, 81, t, -4, 4);
    for (int64_t f : {1, 2, 3}) {
      CAPTURE(f);
      check_equal(ops::upsample_nearest(up(x, t), f), ops::upsample_nearest(x, f));
    }
    const Tensor img = input({2, 5, 6, 10}, 82, t, -4, 4);
    for (int64_t p : {1, 2}) {
      CAPTURE(p);
      check_equal(ops::patchify(up(img, t), p), ops::patchify(img, p));
    }
    const int64_t h = 3, w = 5, p = 2, ch = 5;
    const Tensor tokens = input({2, h * w, p * p * ch}, 83, t, -4, 4);
    check_equal(ops::unpatchify(up(tokens, t), h, w, p, ch), ops::unpatchify(tokens, h, w, p, ch));
    const Tensor tokens1 = input({1, 7 * 3, 4}, 84, t, -4, 4);  // p = 1
    check_equal(ops::unpatchify(up(tokens1, t), 7, 3, 1, 4), ops::unpatchify(tokens1, 7, 3, 1, 4));
  }
}

TEST_CASE("backend ops: copy_rows (strided and contiguous) and gather_rows are exact") {
  struct Case {
    int64_t src_offset, src_stride, dst_offset, dst_stride, rows, row_len;
  };
  const Case cases[] = {
      {3, 13, 2, 20, 5, 11},  // strided on both sides
      {0, 13, 0, 13, 7, 13},  // contiguous: one block
      {13, 26, 1, 11, 3, 11}, // every other source row into a narrower pitch
      {5, 13, 179, 1, 1, 1},  // one element, to the last one
  };
  for (DType t : gputest::kAllTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_str(t));
      CAPTURE(c.src_offset);
      CAPTURE(c.src_stride);
      CAPTURE(c.dst_offset);
      CAPTURE(c.dst_stride);
      CAPTURE(c.rows);
      CAPTURE(c.row_len);
      const Tensor src = input({7, 13}, 91, t, -4, 4), dst0 = input({9, 20}, 92, t, -4, 4);
      Tensor ref = dst0.clone(), got = up(dst0, t);
      ops::copy_rows(src, c.src_offset, c.src_stride, ref, c.dst_offset, c.dst_stride, c.rows, c.row_len);
      ops::copy_rows(up(src, t), c.src_offset, c.src_stride, got, c.dst_offset, c.dst_stride, c.rows, c.row_len);
      check_equal(got, ref);  // copied rows and everything around them
    }
  for (DType t : gputest::kAllTypes) {
    CAPTURE(dtype_str(t));
    const Tensor table = input({10, 37}, 93, t, -4, 4);
    const std::vector<int64_t> rows = {3, 0, 9, 3, 7};
    const Tensor got = ops::gather_rows(up(table, t), rows);
    CHECK(got.device() == kCUDA);
    CHECK(got.dtype() == t);
    check_equal(got, ops::gather_rows(table, rows));
    CHECK_THROWS_AS(ops::gather_rows(up(table, t), {10}), std::invalid_argument);
  }
}

// ---- The ops Wan adds (rotary, channel RMS norm, conv3d, 3-D patches) ----------------

TEST_CASE("backend ops: rotary_embed, rotary_embed_ and rotary_embed_rows_ (float32 tables, any storage type)") {
  struct Case {
    int64_t batch, tokens, heads, head_dim, first;
  };
  for (DType t : gputest::kAllTypes)
    for (const Case& c : {Case{2, 31, 3, 22, 0}, Case{1, 24, 2, 128, 5}, Case{3, 7, 1, 44, 0}}) {
      CAPTURE(dtype_str(t));
      CAPTURE(c.tokens);
      CAPTURE(c.head_dim);
      CAPTURE(c.first);
      const int64_t w = c.heads * c.head_dim;
      const ops::RotaryTables tab =
          ops::rotary_tables_3d(ops::rotary_split_3d(c.head_dim), {1, 1, c.first + c.tokens});
      const Tensor dcos = tab.cos.to(kCUDA, DType::kF32), dsin = tab.sin.to(kCUDA, DType::kF32);
      const Tensor x = input({c.batch, c.tokens, w}, 91, t, -3, 3);
      const Tensor ref = ops::rotary_embed(x, tab.cos, tab.sin, c.first);
      check_close(ops::rotary_embed(up(x, t), dcos, dsin, c.first), ref, t);
      Tensor inplace = up(x, t).reshape({c.batch, c.tokens, c.heads, c.head_dim});
      ops::rotary_embed_(inplace, dcos, dsin, c.first);
      check_close(inplace.reshape(ref.shape()), ref, t);

      // q and k inside packed q|k|v rows; v must come back bit for bit.
      const Tensor qkv = input({c.batch, c.tokens, 3 * w}, 92, t, -3, 3);
      Tensor ref_qkv = qkv.clone();
      ops::rotary_embed_rows_(ref_qkv, 0, 3 * w, c.batch, c.tokens, w, tab.cos, tab.sin, c.first);
      ops::rotary_embed_rows_(ref_qkv, w, 3 * w, c.batch, c.tokens, w, tab.cos, tab.sin, c.first);
      Tensor got = up(qkv, t);
      ops::rotary_embed_rows_(got, 0, 3 * w, c.batch, c.tokens, w, dcos, dsin, c.first);
      ops::rotary_embed_rows_(got, w, 3 * w, c.batch, c.tokens, w, dcos, dsin, c.first);
      check_close(got, ref_qkv, t);
      const std::vector<float> g = got.to_vector();
      int64_t v_changed = 0;
      for (int64_t r = 0; r < c.batch * c.tokens; ++r)
        for (int64_t j = 2 * w; j < 3 * w; ++j) v_changed += g[r * 3 * w + j] != qkv[r * 3 * w + j];
      CHECK(v_changed == 0);
    }
  // Tables on the host or in bfloat16 beside a CUDA x: refused.
  Tensor x = Tensor::zeros({1, 4, 8}, kCUDA, DType::kBF16);
  const Tensor cos = Tensor::zeros({4, 8}), sin = Tensor::zeros({4, 8});
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos, sin), std::invalid_argument);
  CHECK_THROWS_AS(ops::rotary_embed_(x, cos.to(kCUDA, DType::kBF16), sin.to(kCUDA, DType::kBF16)),
                  std::invalid_argument);
}

TEST_CASE("backend ops: rms_norm_channels (4-D and 5-D, bias, fused SiLU)") {
  for (DType t : gputest::kAllTypes)
    for (const Shape& shape : {Shape{2, 12, 3, 5, 7}, Shape{3, 9, 5, 7}, Shape{1, 96, 2, 17, 19}, Shape{2, 5, 1}})
      for (bool with_bias : {false, true})
        for (bool fuse : {false, true}) {
          CAPTURE(dtype_str(t));
          CAPTURE(shape_str(shape));
          CAPTURE(with_bias);
          CAPTURE(fuse);
          const int64_t ch = shape[1];
          const Tensor x = input(shape, 93, t, -3, 5), gamma = input({ch}, 94, t, 0.5f, 1.5f),
                       bias = input({ch}, 95, t);
          const Tensor ref = ops::rms_norm_channels(x, gamma, with_bias ? &bias : nullptr, fuse);
          const Tensor db = up(bias, t);
          check_close(ops::rms_norm_channels(up(x, t), up(gamma, t), with_bias ? &db : nullptr, fuse), ref, t);
        }
}

TEST_CASE("backend ops: conv3d (causal-form padding, (3,1,1), 1x1x1, strides, patch embedding)") {
  struct Case {
    Shape x;
    int64_t cout;
    std::array<int64_t, 3> k, s, p;
    bool bias;
  };
  const Case cases[] = {
      {{1, 4, 5, 7, 9}, 5, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, true},
      {{2, 3, 4, 5, 6}, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, false},
      {{2, 5, 6, 3, 4}, 3, {3, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},
      {{2, 6, 3, 5, 7}, 4, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},  // the batched plain-GEMM path
      {{1, 3, 7, 9, 11}, 2, {3, 3, 3}, {2, 2, 1}, {0, 1, 0}, true},
      {{2, 3, 3, 10, 14}, 8, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, true},
      // 64 channels, 27 taps, 256 columns: 1.7 MB of columns per output
      // line, so the 64 MiB budget splits the 128 lines into chunks.
      {{1, 64, 4, 64, 256}, 4, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, true},
  };
  for (DType t : gputest::kAllTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_str(t));
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str({c.k[0], c.k[1], c.k[2]}));
      CAPTURE(shape_str({c.s[0], c.s[1], c.s[2]}));
      const Tensor x = input(c.x, 96, t), w = input({c.cout, c.x[1], c.k[0], c.k[1], c.k[2]}, 97, t, -0.2f, 0.2f);
      const Tensor bias = input({c.cout}, 98, t);
      const Tensor db = up(bias, t);
      const Tensor ref = ops::conv3d(x, w, c.bias ? &bias : nullptr, c.s, c.p);
      check_close(ops::conv3d(up(x, t), up(w, t), c.bias ? &db : nullptr, c.s, c.p), ref, t);
    }
}

TEST_CASE("backend ops: patchify3d and unpatchify3d are exact") {
  for (DType t : gputest::kAllTypes)
    for (const std::array<int64_t, 3>& p : {std::array<int64_t, 3>{1, 2, 2}, std::array<int64_t, 3>{2, 3, 1}}) {
      CAPTURE(dtype_str(t));
      CAPTURE(shape_str({p[0], p[1], p[2]}));
      const Tensor video = input({2, 3, 3 * p[0], 5 * p[1], 7 * p[2]}, 99, t);
      check_equal(ops::patchify3d(up(video, t), p), ops::patchify3d(video, p));
      const Tensor tokens = input({2, 105, p[0] * p[1] * p[2] * 4}, 100, t);
      check_equal(ops::unpatchify3d(up(tokens, t), {3, 5, 7}, p, 4), ops::unpatchify3d(tokens, {3, 5, 7}, p, 4));
    }
}
