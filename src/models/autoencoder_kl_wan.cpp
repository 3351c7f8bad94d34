// AutoencoderKLWan decoder forward, following diffusers 0.42.1's
// AutoencoderKLWan._decode / WanDecoder3d / WanMidBlock / WanUpBlock /
// WanResidualBlock / WanAttentionBlock / WanResample / WanCausalConv3d /
// WanRMS_norm (docs/vae-wan.md).
//
// The causal cache. diffusers decodes one latent frame per decoder call and
// keeps, per causal conv (feat_cache[feat_idx]), the last CACHE_T = 2 frames
// of that conv's input (with a 1-frame input: the previous cache's last
// frame and this one); the next call's conv sees [cache | chunk] with
// 2 - (cached frames) zero frames in front. So every 3x3x3 conv sees its
// whole input stream causally padded by two zero frames: here the cache is
// two frames from the start (zeros: CausalPad::kZeros), and every call runs
// causal_conv3d (models/vae_decoder_parts.h: [cache | chunk] along time,
// ops::conv3d with time padding 0, the last two frames of that input kept).
// The (3, 1, 1) time conv of an upsample3d is skipped on the first latent
// frame (diffusers' "Rep" marker: the chunk keeps its one frame) and from
// the second on is the same causal conv over the stream of its inputs from
// the second frame, its cache starting at zeros (diffusers: zeros and the
// frame when "Rep" was set, then the usual rule). So latent frame 0 decodes to 1 frame, every later
// one to 2^(temporal upsamplers) = 4, and feeding the frames one by one is
// diffusers' decode of the whole video.
//
// Memory: one latent frame's activations (at most four output frames at the
// last level) plus the caches (2 frames per causal conv, at its level's
// size), never the video's length. The caches are allocated once, at the
// first frame and before any activation, at their exact sizes (allocated
// later, each would take a larger freed block from the caching allocator);
// the [cache | chunk] inputs of a level's convs share one staging buffer;
// intermediates are released as soon as they are consumed; the 2-D parts of
// the upsamplers run frame by frame; the host blocks cached for one level's
// sizes are given back before the next (4x the pixels) starts. Figures for
// Wan 2.1's VAE at 480x832: docs/vae-wan.md.
//
// Device-agnostic: every step is an op (ops::conv3d, conv2d,
// rms_norm_channels, upsample_nearest, copy_rows, gemm, attention) on the
// placement's device; only the stream's input and output cross to the host.
#include "models/autoencoder_kl_wan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "io/model_dir.h"
#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/strings.h"

namespace ditgen::models {

namespace {

// diffusers' AutoencoderKLWan defaults (Wan 2.1's statistics, z_dim 16).
const std::vector<float> kDefaultMean = {-0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,
                                         -0.1517f, 1.5508f,  0.4134f,  -0.0715f, 0.5517f,  -0.3632f,
                                         -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
const std::vector<float> kDefaultStd = {2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f, 2.6052f, 2.0743f,
                                        3.2687f, 2.1526f, 2.8652f, 1.5579f, 1.6382f, 1.1253f, 2.8251f, 1.9160f};

// Every key diffusers 0.42.1's AutoencoderKLWan.__init__ takes, plus
// clip_output (in Wan 2.2's published configs; 0.42.1 always clamps) and
// force_upcast (diffusers' VAE key, read here). Keys starting with '_' are
// metadata.
const std::set<std::string> kKnownKeys = {
    "base_dim",     "decoder_base_dim", "z_dim",         "dim_mult",   "num_res_blocks",
    "attn_scales",  "temperal_downsample", "dropout",    "latents_mean", "latents_std",
    "is_residual",  "in_channels",      "out_channels",  "patch_size", "scale_factor_temporal",
    "scale_factor_spatial", "clip_output", "force_upcast"};

std::vector<float> float_list(const nlohmann::json& cfg, const char* key, const std::vector<float>& fallback,
                              const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  const auto& a = cfg[key];
  require(a.is_array(), path, std::string(key) + ": expected an array of numbers, got " + a.dump());
  std::vector<float> v;
  for (size_t i = 0; i < a.size(); ++i) {
    require(a[i].is_number(), path, std::string(key) + "[" + std::to_string(i) + "]: expected a number, got " +
                                        a[i].dump());
    v.push_back(static_cast<float>(a[i].get<double>()));
  }
  return v;
}

// Names and shapes of one residual block's tensors under `p`.
void resnet_tensors(TensorList& t, const std::string& p, int64_t cin, int64_t cout) {
  t.push_back({p + "norm1.gamma", {cin, 1, 1, 1}});
  add_conv_tensors(t, p + "conv1.", {cout, cin, 3, 3, 3});
  t.push_back({p + "norm2.gamma", {cout, 1, 1, 1}});
  add_conv_tensors(t, p + "conv2.", {cout, cout, 3, 3, 3});
  if (cin != cout) add_conv_tensors(t, p + "conv_shortcut.", {cout, cin, 1, 1, 1});
}

// The up blocks' channels (WanDecoder3d): block i goes to dims[i + 1], the
// first from dims[0], every later one from the previous block's upsampled
// C/2.
UpBlockChannels up_block_channels(const std::vector<int64_t>& dims) {
  UpBlockChannels c;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    c.in.push_back(i == 0 ? dims[0] : dims[i] / 2);
    c.out.push_back(dims[i + 1]);
  }
  return c;
}

WanResnet load_resnet(const io::WeightStore& w, const std::string& p, int64_t cin, int64_t cout,
                      const Placement& place) {
  WanResnet r;
  r.norm1 = load_placed(w, p + "norm1.gamma", place, false);
  r.conv1 = load_conv3d(w, p + "conv1.", place);
  r.norm2 = load_placed(w, p + "norm2.gamma", place, false);
  r.conv2 = load_conv3d(w, p + "conv2.", place);
  if (cin != cout) r.shortcut = load_conv3d(w, p + "conv_shortcut.", place);
  return r;
}

// [1, C, T, H, W] <-> [T, C, H, W] (frames as a batch of images, for the
// per-frame 2-D ops): one copy_rows per frame, none when T == 1.
Tensor frames_to_batch(const Tensor& x, const Placement& place) {
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  if (t == 1) return x.reshape({1, c, h, w});
  Tensor out = place.empty({t, c, h, w});
  for (int64_t f = 0; f < t; ++f) ops::copy_rows(x, f * hw, t * hw, out, f * c * hw, hw, c, hw);
  return out;
}

Tensor batch_to_frames(const Tensor& x, const Placement& place) {
  const int64_t t = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), hw = h * w;
  if (t == 1) return x.reshape({1, c, 1, h, w});
  Tensor out = place.empty({1, c, t, h, w});
  for (int64_t f = 0; f < t; ++f) ops::copy_rows(x, f * c * hw, hw, out, f * hw, t * hw, c, hw);
  return out;
}

}  // namespace

int64_t AutoencoderKLWanConfig::temporal_factor() const {
  int64_t f = 1;
  for (bool t : temperal_downsample) f *= t ? 2 : 1;
  return f;
}

std::vector<int64_t> AutoencoderKLWanConfig::dims() const {
  std::vector<int64_t> d = {decoder_base_dim * dim_mult.back()};
  for (auto it = dim_mult.rbegin(); it != dim_mult.rend(); ++it) d.push_back(decoder_base_dim * *it);
  return d;
}

AutoencoderKLWanConfig AutoencoderKLWanConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_bool_or;
  using io::get_int_or;
  check_class_and_known_keys(cfg, path, "AutoencoderKLWan", kKnownKeys);

  AutoencoderKLWanConfig c;
  // decoder_base_dim null / absent: base_dim (diffusers).
  read_positive_ints(cfg, path,
                     {{"base_dim", &c.base_dim}, {"decoder_base_dim", &c.decoder_base_dim, &c.base_dim},
                      {"z_dim", &c.z_dim}, {"in_channels", &c.in_channels}, {"out_channels", &c.out_channels}});
  c.num_res_blocks = get_int_or(cfg, "num_res_blocks", c.num_res_blocks, path);
  require(c.num_res_blocks >= 0, path,
          "num_res_blocks: expected a non-negative integer, got " + std::to_string(c.num_res_blocks));
  c.force_upcast = get_bool_or(cfg, "force_upcast", c.force_upcast, path);
  read_positive_int_list(cfg, path, "dim_mult", 16, &c.dim_mult);
  if (cfg.contains("temperal_downsample") && !cfg["temperal_downsample"].is_null()) {
    const auto& t = cfg["temperal_downsample"];
    require(t.is_array(), path, "temperal_downsample: expected an array of booleans, got " + t.dump());
    c.temperal_downsample.clear();
    for (size_t i = 0; i < t.size(); ++i) {
      require(t[i].is_boolean(), path,
              "temperal_downsample[" + std::to_string(i) + "]: expected a boolean, got " + t[i].dump());
      c.temperal_downsample.push_back(t[i].get<bool>());
    }
  }
  require(c.temperal_downsample.size() + 1 == c.dim_mult.size(), path,
          "temperal_downsample: expected " + std::to_string(c.dim_mult.size() - 1) +
              " entries (one per downsampling level: len(dim_mult) - 1), got " +
              std::to_string(c.temperal_downsample.size()));

  // What diffusers builds and this decoder does not.
  if (get_bool_or(cfg, "is_residual", false, path))
    not_supported(path + ": is_residual true (Wan 2.2 TI2V's VAE: residual up blocks with DupUp3D shortcuts)");
  if (get_int_or(cfg, "patch_size", 1, path) != 1)
    not_supported(path + ": patch_size " + cfg["patch_size"].dump() + " (the VAE's own patchify, Wan 2.2 TI2V)");
  if (!get_bool_or(cfg, "clip_output", true, path))
    not_supported(path + ": clip_output false (diffusers 0.42.1 and ditgen's pipeline always clamp to [-1, 1])");
  if (cfg.contains("attn_scales") && !cfg["attn_scales"].is_null()) {
    const auto& a = cfg["attn_scales"];
    require(a.is_array(), path, "attn_scales: expected an array, got " + a.dump());
    // diffusers' encoder adds attention blocks at these scales and its
    // decoder none (the original Wan decoder would add them): refused
    // rather than guessed.
    if (!a.empty()) not_supported(path + ": attn_scales " + a.dump() + " (only [])");
  }
  const double dropout = io::get_number_or(cfg, "dropout", 0.0, path);
  if (dropout != 0.0)
    not_supported(path + ": dropout " + cfg["dropout"].dump() + " (only 0: ditgen has no training-mode decoder)");

  c.latents_mean = float_list(cfg, "latents_mean", kDefaultMean, path);
  c.latents_std = float_list(cfg, "latents_std", kDefaultStd, path);
  for (const auto& [key, v] : {std::pair{"latents_mean", &c.latents_mean}, {"latents_std", &c.latents_std}})
    require(static_cast<int64_t>(v->size()) == c.z_dim, path,
            std::string(key) + ": expected z_dim = " + std::to_string(c.z_dim) + " values, got " +
                std::to_string(v->size()));
  for (size_t i = 0; i < c.latents_std.size(); ++i)
    require(std::isfinite(c.latents_std[i]) && c.latents_std[i] != 0.0f && std::isfinite(c.latents_mean[i]), path,
            "latents_mean / latents_std[" + std::to_string(i) + "]: expected finite values and a non-zero std");

  // The pipeline's factors (WanPipeline reads these keys) must be the
  // decoder's own.
  const int64_t sf = get_int_or(cfg, "scale_factor_spatial", c.spatial_factor(), path);
  const int64_t tf = get_int_or(cfg, "scale_factor_temporal", c.temporal_factor(), path);
  require(sf == c.spatial_factor(), path,
          "scale_factor_spatial: " + std::to_string(sf) + ", but the decoder upsamples by " +
              std::to_string(c.spatial_factor()) + " (2^(len(dim_mult) - 1))");
  require(tf == c.temporal_factor(), path,
          "scale_factor_temporal: " + std::to_string(tf) + ", but the decoder's time upsampling gives " +
              std::to_string(c.temporal_factor()) + " (2^(true entries of temperal_downsample))");
  return c;
}

AutoencoderKLWan AutoencoderKLWan::load(const io::WeightStore& w, const AutoencoderKLWanConfig& c,
                                        const Placement& place) {
  const std::vector<int64_t> dims = c.dims();
  const UpBlockChannels up = up_block_channels(dims);
  const int64_t z = c.z_dim, c0 = dims[0], c_last = dims.back();
  const std::string mid = "decoder.mid_block.", att = mid + "attentions.0.";

  // Every name and shape, checked before anything is loaded.
  TensorList expected;
  add_conv_tensors(expected, "post_quant_conv.", {z, z, 1, 1, 1});
  add_conv_tensors(expected, "decoder.conv_in.", {c0, z, 3, 3, 3});
  expected.push_back({att + "norm.gamma", {c0, 1, 1}});
  add_conv_tensors(expected, att + "to_qkv.", {3 * c0, c0, 1, 1});
  add_conv_tensors(expected, att + "proj.", {c0, c0, 1, 1});
  expected.push_back({"decoder.norm_out.gamma", {c_last, 1, 1, 1}});
  add_conv_tensors(expected, "decoder.conv_out.", {c.out_channels, c_last, 3, 3, 3});
  for (int r = 0; r < 2; ++r) resnet_tensors(expected, mid + "resnets." + std::to_string(r) + ".", c0, c0);
  walk_up_blocks(
      up, c.num_res_blocks + 1, [&](const UpResnet& r) { resnet_tensors(expected, r.prefix, r.cin, r.cout); },
      [&](size_t i, const std::string& ub) {
        if (i + 1 == up.out.size()) return;
        const int64_t ch = up.out[i];
        add_conv_tensors(expected, ub + "upsamplers.0.resample.1.", {ch / 2, ch, 3, 3});
        if (c.temporal_upsample(i)) add_conv_tensors(expected, ub + "upsamplers.0.time_conv.", {2 * ch, ch, 3, 1, 1});
      });
  // A decoder tensor the config does not account for means config and
  // weights disagree (another num_res_blocks, dim_mult or
  // temperal_downsample).
  expect_decoder_tensors(w, expected, "dim_mult, num_res_blocks, temperal_downsample");

  AutoencoderKLWan m;
  m.place_ = place;
  m.cfg_ = c;
  m.post_quant = load_conv3d(w, "post_quant_conv.", place);
  m.conv_in = load_conv3d(w, "decoder.conv_in.", place);
  m.mid_resnet0 = load_resnet(w, mid + "resnets.0.", c0, c0, place);
  m.mid_resnet1 = load_resnet(w, mid + "resnets.1.", c0, c0, place);
  m.mid_attn.norm = load_placed(w, att + "norm.gamma", place, false);
  {
    // The 1x1 convs as GEMM operands: qkv the b of a GEMM (its dtype the
    // arithmetic, as AutoencoderKL's), proj the a (float32 on the CPU).
    const Tensor qkv = w.load(att + "to_qkv.weight");
    m.mid_attn.qkv_w = release_source(w, att + "to_qkv.weight", qkv, place.matrix(qkv.reshape({3 * c0, c0})));
    m.mid_attn.qkv_b = load_placed(w, att + "to_qkv.bias", place, false);
    const Tensor proj = w.load(att + "proj.weight");
    m.mid_attn.proj_w = release_source(w, att + "proj.weight", proj, place.put(proj.reshape({c0, c0})));
    m.mid_attn.proj_b = load_placed(w, att + "proj.bias", place, false);
  }
  m.up_blocks = load_up_blocks<WanUpBlock>(
      up, c.num_res_blocks + 1, [&](const UpResnet& r) { return load_resnet(w, r.prefix, r.cin, r.cout, place); },
      [&](size_t i, const std::string& ub, WanUpBlock& blk) {
        if (i + 1 == up.out.size()) return;  // the last block: no upsampler
        blk.upsample = true;
        blk.temporal = c.temporal_upsample(i);
        if (blk.temporal) blk.time_conv = load_conv3d(w, ub + "upsamplers.0.time_conv.", place);
        blk.up_w = load_placed(w, ub + "upsamplers.0.resample.1.weight", place, true);
        blk.up_b = load_placed(w, ub + "upsamplers.0.resample.1.bias", place, false);
      });
  m.norm_out = load_placed(w, "decoder.norm_out.gamma", place, false);
  m.conv_out = load_conv3d(w, "decoder.conv_out.", place);
  // diffusers' feat_idx order; an upsample3d's time conv after its block's
  // residual blocks.
  m.slots_ = decoder_causal_slots<WanResnet>(
      m.conv_in, {&m.mid_resnet0, &m.mid_resnet1}, m.up_blocks, m.conv_out,
      [](const WanUpBlock& b) { return b.temporal ? &b.time_conv : nullptr; });
  return m;
}

Tensor AutoencoderKLWan::resnet(Tensor x, const WanResnet& r, Cache& cache) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = ops::rms_norm_channels(x, r.norm1, nullptr, true);
  }
  h = causal_conv3d(std::move(h), r.conv1, cache, place_, 1);
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = ops::rms_norm_channels(h, r.norm2, nullptr, true);
  }
  h = causal_conv3d(std::move(h), r.conv2, cache, place_, 1);
  add_residual(h, x, r.shortcut);
  return h;
}

Tensor AutoencoderKLWan::attention(Tensor x, const WanAttention& a) const {
  profile::ScopedTimer t("vae.attention");
  const int64_t c = x.dim(1), frames = x.dim(2), n = x.dim(3) * x.dim(4);
  // Per frame, as a batch of images [T, C, H*W] (no copy for one frame).
  const Tensor normed = frames_to_batch(ops::rms_norm_channels(x, a.norm, nullptr, false), place_);

  // qkv[f][t, :] = normed[f][:, t]^T · qkv_w^T (token rows q | k | v).
  Tensor qkv = place_.empty({frames * n, 3 * c});
  for (int64_t f = 0; f < frames; ++f) {
    Tensor rows = qkv.slice0(f * n, (f + 1) * n);
    ops::gemm(true, true, 1.0f, normed.slice0(f, f + 1).reshape({c, n}), a.qkv_w, 0.0f, rows);
  }
  ops::add_broadcast_(qkv, a.qkv_b);

  Tensor attn = place_.empty({frames * n, c});  // one head of c channels per frame
  ops::AttentionArgs args = ops::attention_args(ops::rows_of(qkv, 0, 3 * c, n), ops::rows_of(qkv, c, 3 * c, n),
                                                ops::rows_of(qkv, 2 * c, 3 * c, n), ops::rows_of(attn, 0, c, n),
                                                frames, 1, c);
  args.follow_attention_mode = false;  // --attention is the transformer's; head size c (384) here
  args.compute = place_.dtype;
  ops::attention(args);
  qkv = Tensor();

  // out[f] = x[f] + proj_b · 1^T + proj_w · attn[f]^T, [C, H*W] per frame.
  Tensor out = (frames == 1 ? x.clone() : frames_to_batch(x, place_)).reshape({frames, c, n});
  x = Tensor();
  const Tensor ones = ones_row(n);
  for (int64_t f = 0; f < frames; ++f) {
    Tensor o = out.slice0(f, f + 1).reshape({c, n});
    ops::gemm(false, false, 1.0f, a.proj_b.reshape({c, 1}), ones, 1.0f, o);
    ops::gemm(false, true, 1.0f, a.proj_w, attn.slice0(f * n, (f + 1) * n), 1.0f, o);
  }
  const int64_t h = normed.dim(2), w = normed.dim(3);
  return batch_to_frames(out.reshape({frames, c, h, w}), place_);
}

Tensor AutoencoderKLWan::ones_row(int64_t n) const { return place_.put(Tensor::full({1, n}, 1.0f)); }

Tensor AutoencoderKLWan::upsample(Tensor x, const WanUpBlock& b, Cache& cache) const {
  if (b.temporal) {
    if (!cache.started) {
      ++cache.next;  // the first latent frame skips the time conv (diffusers' "Rep"): its slot stays zeros
    } else {
      const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
      const Tensor z = causal_conv3d(std::move(x), b.time_conv, cache, place_, 0);  // [1, 2C, T, H, W]
      // out[:, ch, 2 tt + j] = z[:, j C + ch, tt].
      profile::ScopedTimer timer("vae.upsample");
      x = place_.empty({1, c, 2 * t, h, w});
      for (int64_t j = 0; j < 2; ++j) ops::copy_rows(z, j * c * t * hw, hw, x, j * hw, 2 * hw, c * t, hw);
    }
  }
  // Per frame: nearest-exact x2 (= nearest for x2) and the 3x3 conv to C/2.
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  const int64_t co = b.up_w.dim(0), ohw = 4 * hw;
  auto one_frame = [&](const Tensor& frame) {  // [1, C, H, W] -> [1, C/2, 2H, 2W]
    Tensor up;
    {
      profile::ScopedTimer timer("vae.upsample");
      up = ops::upsample_nearest(frame, 2);
    }
    profile::ScopedTimer timer("vae.conv2d");
    return ops::conv2d(up, b.up_w, &b.up_b, 1, 1);
  };
  if (t == 1) return one_frame(x.reshape({1, c, h, w})).reshape({1, co, 1, 2 * h, 2 * w});
  Tensor out = place_.empty({1, co, t, 2 * h, 2 * w});
  Tensor frame = place_.empty({1, c, h, w});
  for (int64_t f = 0; f < t; ++f) {
    ops::copy_rows(x, f * hw, t * hw, frame, 0, hw, c, hw);
    const Tensor y = one_frame(frame);
    ops::copy_rows(y, 0, ohw, out, f * ohw, t * ohw, co, ohw);
  }
  return out;
}

Tensor AutoencoderKLWan::decode_chunk(const Tensor& z, Cache& cache) const {
  if (begin_causal_call(cache, z, cfg_.z_dim, 1, kNames)) start_causal_cache(cache, slots_, CausalPad::kZeros, place_);
  Tensor x;
  {
    profile::ScopedTimer t("vae.conv_in");
    x = post_quant(z);  // 1x1x1: no cache
  }
  x = causal_conv3d(std::move(x), conv_in, cache, place_, 1);
  x = resnet(std::move(x), mid_resnet0, cache);
  x = attention(std::move(x), mid_attn);
  x = resnet(std::move(x), mid_resnet1, cache);
  for (const WanUpBlock& blk : up_blocks) {
    for (const WanResnet& r : blk.resnets) x = resnet(std::move(x), r, cache);
    if (!blk.upsample) continue;  // the last block: conv_out works at its size
    x = upsample(std::move(x), blk, cache);
    // The next block works at 4x the pixels: this one's staging buffer and
    // the host blocks cached for its sizes could not hold its, so they go
    // back now.
    cache.staging = Tensor();
    device_memory::release_cached_host();
  }
  {
    profile::ScopedTimer t("vae.rms_norm");
    x = ops::rms_norm_channels(x, norm_out, nullptr, true);
  }
  x = causal_conv3d(std::move(x), conv_out, cache, place_, 1);
  cache.staging = Tensor();
  end_causal_call(cache, kNames);
  return x;
}

ChunkedDecode AutoencoderKLWan::chunked(int64_t latent_frames, const Cache& cache, bool stream) const {
  // The first latent frame of a cache makes 1 frame, every later one
  // temporal_factor().
  const int64_t tf = cfg_.temporal_factor();
  return {std::vector<int64_t>(static_cast<size_t>(latent_frames), 1),
          (cache.started ? 0 : 1 - tf) + latent_frames * tf, cfg_.out_channels, cfg_.spatial_factor(), stream};
}

std::unique_ptr<VaeSpec> make_autoencoder_kl_wan_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<AutoencoderKLWanSpec>(cfg, path);
}

}  // namespace ditgen::models
