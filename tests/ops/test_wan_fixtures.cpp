// ditgen's ops against diffusers 0.42.1's own Wan modules, on the tiny
// float32 fixtures of tests/fixtures/wan_ops/ (made by
// scripts/fixtures/make_wan_op_fixtures.py, which says what each tensor is):
// WanRotaryPosEmbed's tables, WanAttention's norm_q / norm_k (torch.nn.RMSNorm
// across heads) and its rotary application, WanRMS_norm (+ SiLU),
// WanCausalConv3d without and with a cache, WanResample("upsample3d") with
// a cache composed from conv3d, copy_rows, upsample_nearest and conv2d, the
// patch embedding and unpatchify, and WanTransformerBlock's modulation.
// Tolerance: max|Δ| / max|ref| < 1e-6 (float32 arithmetic in another order),
// pure data movement exact.
// Each check prints its measured error.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <string>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace ditgen;
using ditgen::testing::max_rel;

namespace {

std::shared_ptr<io::SafetensorsFile> fixture(const char* name) {
  return io::SafetensorsFile::open(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/wan_ops/" + name);
}

// A float32 copy (owned, so views and in-place ops are free to write).
Tensor load(const io::SafetensorsFile& f, const std::string& name) { return f.load(name).clone(); }

void check_close(const std::string& what, const Tensor& got, const Tensor& ref, double tol = 1e-6) {
  REQUIRE(got.numel() == ref.numel());
  const double err = max_rel(got.data(), ref.data(), ref.numel());
  MESSAGE(what << ": max|d|/max|ref| = " << err);
  CHECK(err < tol);
}

void check_exact(const std::string& what, const Tensor& got, const Tensor& ref) {
  REQUIRE(got.numel() == ref.numel());
  CHECK_MESSAGE(std::memcmp(got.raw(), ref.raw(), ref.nbytes()) == 0, what);
  MESSAGE(what << ": exact");
}

// [1, C, n0 zero frames + frames of each part..., H, W] from [1, C, T_i, H, W] parts.
Tensor cat_frames(int64_t zero_frames, std::initializer_list<Tensor> parts) {
  const Tensor& first = *parts.begin();
  const int64_t c = first.dim(1), plane = first.dim(3) * first.dim(4);
  int64_t t = zero_frames;
  for (const Tensor& p : parts) t += p.dim(2);
  Tensor out = Tensor::zeros({1, c, t, first.dim(3), first.dim(4)});
  int64_t at = zero_frames;
  for (const Tensor& p : parts) {
    for (int64_t ch = 0; ch < c; ++ch)
      std::memcpy(out.data() + (ch * t + at) * plane, p.data() + ch * p.dim(2) * plane,
                  sizeof(float) * p.dim(2) * plane);
    at += p.dim(2);
  }
  return out;
}

}  // namespace

TEST_CASE("wan fixtures: rotary tables equal WanRotaryPosEmbed's (head sizes 128 and 44)") {
  const auto f = fixture("rotary.safetensors");
  struct Case {
    const char* name;
    int64_t head_dim;
    std::array<int64_t, 3> grid;
  };
  for (const Case& c : {Case{"d128", 128, {2, 3, 4}}, Case{"d44", 44, {3, 5, 7}}}) {
    const ops::RotaryTables t = ops::rotary_tables_3d(ops::rotary_split_3d(c.head_dim), c.grid);
    check_close(std::string("cos ") + c.name, t.cos, load(*f, std::string("cos_") + c.name));
    check_close(std::string("sin ") + c.name, t.sin, load(*f, std::string("sin_") + c.name));
  }
}

TEST_CASE("wan fixtures: rms_norm is torch.nn.RMSNorm across heads, rotary_embed_ is the processor's apply") {
  const auto f = fixture("rotary.safetensors");
  const float eps = 1e-6f;
  const ops::RotaryTables t = ops::rotary_tables_3d(ops::rotary_split_3d(128), {2, 3, 4});
  for (const std::string w : {"q", "k"}) {
    const Tensor proj = load(*f, w + "_proj");  // [1, 24, 2 * 128]
    const Tensor normed = ops::rms_norm(proj, load(*f, "norm_" + w + "_weight"), eps);
    check_close(w + " RMSNorm across heads", normed, load(*f, w + "_normed"));
    // The rotation alone, from diffusers' normed values.
    check_close(w + " rotary", ops::rotary_embed(load(*f, w + "_normed"), t.cos, t.sin),
                load(*f, w + "_rot"));
    // The chain, in place on [B, S, H, Dh] as the attention holds it.
    Tensor chain = normed.reshape({1, 24, 2, 128});
    ops::rotary_embed_(chain, t.cos, t.sin);
    check_close(w + " RMSNorm + rotary", chain, load(*f, w + "_rot"));
  }
}

TEST_CASE("wan fixtures: rms_norm_channels is WanRMS_norm (5-D, 5-D with bias, 4-D), SiLU fused") {
  const auto f = fixture("rms_norm_channels.safetensors");
  for (const std::string n : {"v", "vb", "i"}) {
    const Tensor x = load(*f, "x_" + n), gamma = load(*f, "gamma_" + n);
    const Tensor bias = f->contains("bias_" + n) ? load(*f, "bias_" + n) : Tensor();
    const Tensor* bp = bias.defined() ? &bias : nullptr;
    check_close("WanRMS_norm " + n, ops::rms_norm_channels(x, gamma, bp, false), load(*f, "y_" + n));
    check_close("WanRMS_norm + SiLU " + n, ops::rms_norm_channels(x, gamma, bp, true),
                load(*f, "y_silu_" + n));
  }
}

TEST_CASE("wan fixtures: conv3d on cached frames put in front is WanCausalConv3d with its cache") {
  const auto f = fixture("causal_conv3d.safetensors");
  const Tensor x = load(*f, "x"), cache2 = load(*f, "cache2"), w = load(*f, "w"), b = load(*f, "b");
  // The last cached frame alone: [1, C, 1, H, W].
  Tensor last = Tensor::empty({1, cache2.dim(1), 1, cache2.dim(3), cache2.dim(4)});
  const int64_t plane = cache2.dim(3) * cache2.dim(4);
  for (int64_t c = 0; c < cache2.dim(1); ++c)
    std::memcpy(last.data() + c * plane, cache2.data() + (c * 2 + 1) * plane, sizeof(float) * plane);
  const std::array<int64_t, 3> one{1, 1, 1}, causal{0, 1, 1}, none{0, 0, 0};
  // First chunk: two zero frames in front (2 * padding_t).
  check_close("causal conv, no cache", ops::conv3d(cat_frames(2, {x}), w, &b, one, causal), load(*f, "y_nocache"));
  check_close("causal conv, 2-frame cache", ops::conv3d(cat_frames(0, {cache2, x}), w, &b, one, causal),
              load(*f, "y_cache2"));
  // A 1-frame cache: one zero frame, the cached frame, the chunk.
  check_close("causal conv, 1-frame cache", ops::conv3d(cat_frames(1, {last, x}), w, &b, one, causal),
              load(*f, "y_cache1"));
  const Tensor tb = load(*f, "tb"), sb = load(*f, "sb");
  check_close("time conv (3,1,1), 2-frame cache",
              ops::conv3d(cat_frames(0, {cache2, x}), load(*f, "tw"), &tb, one, none), load(*f, "ty_cache2"));
  check_close("1x1x1 shortcut", ops::conv3d(x, load(*f, "sw"), &sb, one, none), load(*f, "sy"));
}

TEST_CASE("wan fixtures: WanResample upsample3d with a cache = conv3d, copy_rows, upsample_nearest, conv2d") {
  const auto f = fixture("resample.safetensors");
  const Tensor x = load(*f, "x"), cache = load(*f, "cache");
  const Tensor tw = load(*f, "time_w"), tb = load(*f, "time_b"), cw = load(*f, "conv_w"), cb = load(*f, "conv_b");
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  // Time conv (3,1,1) over the cached frames and the chunk: [1, 2C, T, H, W].
  const Tensor z = ops::conv3d(cat_frames(0, {cache, x}), tw, &tb, {1, 1, 1}, {0, 0, 0});
  REQUIRE(z.shape() == Shape{1, 2 * c, t, h, w});
  // Interleave into 2T frames: out[:, ch, 2 tt + j] = z[:, j * C + ch, tt].
  Tensor doubled = Tensor::empty({1, c, 2 * t, h, w});
  for (int64_t j = 0; j < 2; ++j) ops::copy_rows(z, j * c * t * hw, hw, doubled, j * hw, 2 * hw, c * t, hw);
  // Per frame: [2T, C, H, W], nearest x2, 3x3 conv to C / 2 channels.
  const int64_t frames = 2 * t;
  Tensor per_frame = Tensor::empty({frames, c, h, w});
  for (int64_t fr = 0; fr < frames; ++fr) ops::copy_rows(doubled, fr * hw, frames * hw, per_frame, fr * c * hw, hw, c, hw);
  const Tensor conv = ops::conv2d(ops::upsample_nearest(per_frame, 2), cw, &cb, 1, 1);  // [2T, C/2, 2H, 2W]
  const int64_t co = conv.dim(1), plane = conv.dim(2) * conv.dim(3);
  Tensor out = Tensor::empty({1, co, frames, conv.dim(2), conv.dim(3)});
  for (int64_t fr = 0; fr < frames; ++fr)
    ops::copy_rows(conv, fr * co * plane, plane, out, fr * plane, frames * plane, co, plane);
  const Tensor ref = load(*f, "y");
  REQUIRE(out.shape() == ref.shape());
  check_close("WanResample upsample3d (cached)", out, ref);
  check_exact("WanUpsample nearest-exact x2", ops::upsample_nearest(load(*f, "up_x"), 2), load(*f, "up_y"));
}

TEST_CASE("wan fixtures: patch embedding (linear of patchify3d, and conv3d) and unpatchify3d") {
  const auto f = fixture("patch.safetensors");
  const Tensor x = load(*f, "x"), w = load(*f, "embed_w"), b = load(*f, "embed_b");
  const int64_t d = w.dim(0);
  const Tensor tokens = ops::linear(ops::patchify3d(x, {1, 2, 2}), w.reshape({d, w.numel() / d}), &b);
  check_close("patch embedding as linear(patchify3d)", tokens, load(*f, "tokens"));
  // The same as conv3d (kernel = stride = patch), then flatten(2).transpose(1, 2).
  const Tensor conv = ops::conv3d(x, w, &b, {1, 2, 2}, {0, 0, 0});
  const int64_t bsz = conv.dim(0), n = conv.numel() / (bsz * d);
  Tensor conv_tokens = Tensor::empty({bsz, n, d});
  for (int64_t i = 0; i < bsz; ++i)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t o = 0; o < d; ++o) conv_tokens[(i * n + t) * d + o] = conv[(i * d + o) * n + t];
  check_close("patch embedding as conv3d", conv_tokens, load(*f, "tokens"));
  check_exact("unpatchify3d", ops::unpatchify3d(load(*f, "proj"), {3, 5, 7}, {1, 2, 2}, 5), load(*f, "video"));
}

TEST_CASE("wan fixtures: modulation per sample and per token through add_broadcast_, layer_norm_modulate, "
          "gated_residual_") {
  const auto f = fixture("modulation.safetensors");
  const Tensor x = load(*f, "x"), y = load(*f, "attn"), table = load(*f, "table");
  const int64_t b = x.dim(0), s = x.dim(1), d = x.dim(2);
  for (const std::string n : {"sample", "token"}) {
    const bool per_token = n == "token";
    Tensor mod = load(*f, "temb_" + n).reshape({per_token ? b * s : b, 6 * d});
    ops::add_broadcast_(mod, table);
    const Tensor xv = per_token ? x.reshape({b * s, 1, d}) : x;
    Tensor normed = Tensor::empty(xv.shape());
    ops::layer_norm_modulate(xv, mod, 0, d, 1e-6f, normed);
    check_close("norm1 * (1 + scale) + shift, per " + n, normed, load(*f, "normed_" + n));
    Tensor res = xv.clone();
    ops::gated_residual_(res, per_token ? y.reshape({b * s, 1, d}) : y, mod, 2 * d);
    check_close("x + attn * gate, per " + n, res, load(*f, "residual_" + n));
  }
}
