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
// two frames from the start (zeros), every call builds [cache | chunk]
// (ops::copy_rows along time), runs ops::conv3d with time padding 0, and
// keeps the last two frames of that input. The (3, 1, 1) time conv of an
// upsample3d is skipped on the first latent frame (diffusers' "Rep" marker:
// the chunk keeps its one frame) and from the second on is the same causal
// conv over the stream of its inputs from the second frame, its cache
// starting at zeros (diffusers: zeros and the frame when "Rep" was set,
// then the usual rule). So latent frame 0 decodes to 1 frame, every later
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
void resnet_tensors(std::vector<std::pair<std::string, Shape>>& t, const std::string& p, int64_t cin,
                    int64_t cout) {
  t.push_back({p + "norm1.gamma", {cin, 1, 1, 1}});
  t.push_back({p + "conv1.weight", {cout, cin, 3, 3, 3}});
  t.push_back({p + "conv1.bias", {cout}});
  t.push_back({p + "norm2.gamma", {cout, 1, 1, 1}});
  t.push_back({p + "conv2.weight", {cout, cout, 3, 3, 3}});
  t.push_back({p + "conv2.bias", {cout}});
  if (cin != cout) {
    t.push_back({p + "conv_shortcut.weight", {cout, cin, 1, 1, 1}});
    t.push_back({p + "conv_shortcut.bias", {cout}});
  }
}

// Input and output channels of residual block j of up block i
// (WanDecoder3d: the first takes the previous block's upsampled C/2).
std::pair<int64_t, int64_t> up_resnet_channels(const std::vector<int64_t>& dims, size_t i, int64_t j) {
  const int64_t in = i == 0 ? dims[0] : dims[i] / 2, out = dims[i + 1];
  return {j == 0 ? in : out, out};
}

// A weight placed by `placed` (one of place's methods) with its file pages
// released when that made a copy.
Tensor load_placed(const io::WeightStore& w, const std::string& name, const Placement& place, bool conv) {
  const Tensor source = w.load(name);
  return release_source(w, name, source, conv ? place.conv(source) : place.put(source));
}

WanConv load_conv(const io::WeightStore& w, const std::string& p, const Placement& place) {
  return {load_placed(w, p + "weight", place, true), load_placed(w, p + "bias", place, false)};
}

WanResnet load_resnet(const io::WeightStore& w, const std::string& p, int64_t cin, int64_t cout,
                      const Placement& place) {
  WanResnet r;
  r.norm1 = load_placed(w, p + "norm1.gamma", place, false);
  r.conv1 = load_conv(w, p + "conv1.", place);
  r.norm2 = load_placed(w, p + "norm2.gamma", place, false);
  r.conv2 = load_conv(w, p + "conv2.", place);
  if (cin != cout) r.shortcut = load_conv(w, p + "conv_shortcut.", place);
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
  require(cfg.is_object(), path, "expected a JSON object");
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == "AutoencoderKLWan", path, "_class_name: not an AutoencoderKLWan (got '" + cls + "')");
  for (const auto& [key, value] : cfg.items())
    if (!key.empty() && key[0] != '_' && !kKnownKeys.count(key))
      throw ModelError(path + ": " + key + ": not a key diffusers' AutoencoderKLWan takes (not supported yet; "
                       "ditgen refuses what it would otherwise ignore)");

  AutoencoderKLWanConfig c;
  c.base_dim = get_int_or(cfg, "base_dim", c.base_dim, path);
  c.decoder_base_dim = get_int_or(cfg, "decoder_base_dim", c.base_dim, path);
  c.z_dim = get_int_or(cfg, "z_dim", c.z_dim, path);
  c.num_res_blocks = get_int_or(cfg, "num_res_blocks", c.num_res_blocks, path);
  c.in_channels = get_int_or(cfg, "in_channels", c.in_channels, path);
  c.out_channels = get_int_or(cfg, "out_channels", c.out_channels, path);
  c.force_upcast = get_bool_or(cfg, "force_upcast", c.force_upcast, path);
  for (auto [key, v] : {std::pair{"base_dim", c.base_dim}, {"decoder_base_dim", c.decoder_base_dim},
                        {"z_dim", c.z_dim}, {"in_channels", c.in_channels}, {"out_channels", c.out_channels}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  require(c.num_res_blocks >= 0, path,
          "num_res_blocks: expected a non-negative integer, got " + std::to_string(c.num_res_blocks));

  if (cfg.contains("dim_mult") && !cfg["dim_mult"].is_null()) {
    const auto& d = cfg["dim_mult"];
    require(d.is_array() && !d.empty() && d.size() <= 16, path,
            "dim_mult: expected a non-empty array of at most 16 integers, got " + d.dump());
    c.dim_mult.clear();
    for (size_t i = 0; i < d.size(); ++i) {
      require(d[i].is_number_integer() && d[i].get<int64_t>() > 0, path,
              "dim_mult[" + std::to_string(i) + "]: expected a positive integer, got " + d[i].dump());
      c.dim_mult.push_back(d[i].get<int64_t>());
    }
  }
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
  const size_t n = c.dim_mult.size();
  const int64_t z = c.z_dim, c0 = dims[0], c_last = dims.back();
  const std::string mid = "decoder.mid_block.", att = mid + "attentions.0.";

  // Every name and shape, checked before anything is loaded.
  std::vector<std::pair<std::string, Shape>> expected = {
      {"post_quant_conv.weight", {z, z, 1, 1, 1}},
      {"post_quant_conv.bias", {z}},
      {"decoder.conv_in.weight", {c0, z, 3, 3, 3}},
      {"decoder.conv_in.bias", {c0}},
      {att + "norm.gamma", {c0, 1, 1}},
      {att + "to_qkv.weight", {3 * c0, c0, 1, 1}},
      {att + "to_qkv.bias", {3 * c0}},
      {att + "proj.weight", {c0, c0, 1, 1}},
      {att + "proj.bias", {c0}},
      {"decoder.norm_out.gamma", {c_last, 1, 1, 1}},
      {"decoder.conv_out.weight", {c.out_channels, c_last, 3, 3, 3}},
      {"decoder.conv_out.bias", {c.out_channels}}};
  for (int r = 0; r < 2; ++r) resnet_tensors(expected, mid + "resnets." + std::to_string(r) + ".", c0, c0);
  for (size_t i = 0; i < n; ++i) {
    const std::string ub = "decoder.up_blocks." + std::to_string(i) + ".";
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      auto [cin, cout] = up_resnet_channels(dims, i, j);
      resnet_tensors(expected, ub + "resnets." + std::to_string(j) + ".", cin, cout);
    }
    if (i + 1 < n) {
      const int64_t ch = dims[i + 1], half = ch / 2;
      const std::string up = ub + "upsamplers.0.";
      expected.push_back({up + "resample.1.weight", {half, ch, 3, 3}});
      expected.push_back({up + "resample.1.bias", {half}});
      if (c.temporal_upsample(i)) {
        expected.push_back({up + "time_conv.weight", {2 * ch, ch, 3, 1, 1}});
        expected.push_back({up + "time_conv.bias", {2 * ch}});
      }
    }
  }
  std::set<std::string> names;
  for (auto& [name, shape] : expected) {
    w.expect(name, shape);
    names.insert(name);
  }
  // A decoder tensor the config does not account for means config and
  // weights disagree (another num_res_blocks, dim_mult or
  // temperal_downsample).
  for (const std::string& name : w.names())
    if ((name.rfind("decoder.", 0) == 0 || name.rfind("post_quant_conv.", 0) == 0) && !names.count(name))
      throw ModelError(w.file_of(name) + ": holds '" + name + "', which config.json (dim_mult, num_res_blocks, "
                       "temperal_downsample) does not account for");

  AutoencoderKLWan m;
  m.place_ = place;
  m.cfg_ = c;
  m.post_quant = load_conv(w, "post_quant_conv.", place);
  m.conv_in = load_conv(w, "decoder.conv_in.", place);
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
  m.n_causal_ = 1 + 4 + 1;  // conv_in, the mid block's two residual blocks, conv_out
  m.up_blocks.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string ub = "decoder.up_blocks." + std::to_string(i) + ".";
    WanUpBlock& blk = m.up_blocks[i];
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      auto [cin, cout] = up_resnet_channels(dims, i, j);
      blk.resnets.push_back(load_resnet(w, ub + "resnets." + std::to_string(j) + ".", cin, cout, place));
      m.n_causal_ += 2;
    }
    if (i + 1 < n) {
      const std::string up = ub + "upsamplers.0.";
      blk.upsample = true;
      blk.temporal = c.temporal_upsample(i);
      if (blk.temporal) {
        blk.time_conv = load_conv(w, up + "time_conv.", place);
        m.n_causal_ += 1;
      }
      blk.up_w = load_placed(w, up + "resample.1.weight", place, true);
      blk.up_b = load_placed(w, up + "resample.1.bias", place, false);
    }
  }
  m.norm_out = load_placed(w, "decoder.norm_out.gamma", place, false);
  m.conv_out = load_conv(w, "decoder.conv_out.", place);
  return m;
}

void AutoencoderKLWan::init_cache(Cache& cache, int64_t h, int64_t w) const {
  cache.frames.clear();
  cache.frames.reserve(static_cast<size_t>(n_causal_));
  auto slot = [&](const WanConv& c, int64_t scale) {  // a conv's input frames at `scale` x the latent grid
    cache.frames.push_back(Tensor::zeros({1, c.w.dim(1), 2, h * scale, w * scale}, place_.device, place_.storage()));
  };
  slot(conv_in, 1);
  for (const WanResnet* r : {&mid_resnet0, &mid_resnet1}) {
    slot(r->conv1, 1);
    slot(r->conv2, 1);
  }
  int64_t scale = 1;
  for (const WanUpBlock& blk : up_blocks) {
    for (const WanResnet& r : blk.resnets) {
      slot(r.conv1, scale);
      slot(r.conv2, scale);
    }
    if (blk.temporal) slot(blk.time_conv, scale);
    if (blk.upsample) scale *= 2;
  }
  slot(conv_out, scale);
  if (static_cast<int64_t>(cache.frames.size()) != n_causal_)
    throw std::logic_error("Wan VAE: cache slots do not match the model's causal convs");
  cache.h = h;
  cache.w = w;
}

Tensor AutoencoderKLWan::causal_conv(Tensor x, const WanConv& c, Tensor& slot, Tensor& staging,
                                     bool spatial_pad) const {
  profile::ScopedTimer t("vae.conv3d");
  const int64_t ch = x.dim(1), frames = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  if (slot.shape() != Shape{1, ch, 2, h, w})
    throw std::logic_error("Wan VAE: cache slot " + shape_str(slot.shape()) + " for a conv input " +
                           shape_str(x.shape()));
  // [cache | chunk] along time, in the level's staging buffer.
  const int64_t in_frames = 2 + frames, need = ch * in_frames * hw;
  if (!staging.defined() || staging.numel() < need) {
    staging = Tensor();
    staging = place_.empty({need});
  }
  Tensor in = staging.slice0(0, need).reshape({1, ch, in_frames, h, w});
  ops::copy_rows(slot, 0, 2 * hw, in, 0, in_frames * hw, ch, 2 * hw);
  ops::copy_rows(x, 0, frames * hw, in, 2 * hw, in_frames * hw, ch, frames * hw);
  x = Tensor();
  ops::copy_rows(in, frames * hw, in_frames * hw, slot, 0, 2 * hw, ch, 2 * hw);  // the last two input frames
  const int64_t p = spatial_pad ? 1 : 0;
  return ops::conv3d(in, c.w, &c.b, {1, 1, 1}, {0, p, p});
}

Tensor AutoencoderKLWan::resnet(Tensor x, const WanResnet& r, Cache& cache, size_t& idx) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = ops::rms_norm_channels(x, r.norm1, nullptr, true);
  }
  h = causal_conv(std::move(h), r.conv1, cache.frames[idx++], cache.staging, true);
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = ops::rms_norm_channels(h, r.norm2, nullptr, true);
  }
  h = causal_conv(std::move(h), r.conv2, cache.frames[idx++], cache.staging, true);
  profile::ScopedTimer t("vae.residual");
  if (r.shortcut.w.defined())
    ops::add_(h, ops::conv3d(x, r.shortcut.w, &r.shortcut.b, {1, 1, 1}, {0, 0, 0}));
  else
    ops::add_(h, x);
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

Tensor AutoencoderKLWan::upsample(Tensor x, const WanUpBlock& b, Cache& cache, size_t& idx) const {
  if (b.temporal) {
    Tensor& slot = cache.frames[idx++];
    // The first latent frame skips the time conv (diffusers' "Rep").
    if (cache.started) {
      const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
      const Tensor z = causal_conv(std::move(x), b.time_conv, slot, cache.staging, false);  // [1, 2C, T, H, W]
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

Tensor AutoencoderKLWan::decode_frame(const Tensor& z, Cache& cache) const {
  if (z.ndim() != 5 || z.dim(0) != 1 || z.dim(1) != cfg_.z_dim || z.dim(2) != 1 || z.dim(3) < 1 || z.dim(4) < 1)
    throw RuntimeFailure("Wan VAE decode: latent frame " + shape_str(z.shape()) + " is not [1, " +
                         std::to_string(cfg_.z_dim) + ", 1, h, w]");
  if (!cache.started) {
    init_cache(cache, z.dim(3), z.dim(4));
  } else if (z.dim(3) != cache.h || z.dim(4) != cache.w) {
    throw RuntimeFailure("Wan VAE decode: latent frame of " + std::to_string(z.dim(3)) + "x" +
                         std::to_string(z.dim(4)) + " after frames of " + std::to_string(cache.h) + "x" +
                         std::to_string(cache.w));
  }
  size_t idx = 0;
  Tensor x;
  {
    profile::ScopedTimer t("vae.conv_in");
    x = ops::conv3d(z, post_quant.w, &post_quant.b, {1, 1, 1}, {0, 0, 0});  // 1x1x1: no cache
  }
  x = causal_conv(std::move(x), conv_in, cache.frames[idx++], cache.staging, true);
  x = resnet(std::move(x), mid_resnet0, cache, idx);
  x = attention(std::move(x), mid_attn);
  x = resnet(std::move(x), mid_resnet1, cache, idx);
  for (const WanUpBlock& blk : up_blocks) {
    for (const WanResnet& r : blk.resnets) x = resnet(std::move(x), r, cache, idx);
    if (!blk.upsample) continue;  // the last block: conv_out works at its size
    x = upsample(std::move(x), blk, cache, idx);
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
  x = causal_conv(std::move(x), conv_out, cache.frames[idx++], cache.staging, true);
  cache.staging = Tensor();
  if (idx != cache.frames.size()) throw std::logic_error("Wan VAE decode: cache slots used do not match the model");
  cache.started = true;
  return x;
}

Tensor AutoencoderKLWan::decode(const Tensor& z) const {
  if (z.ndim() != 5 || z.dim(0) != 1 || z.dim(1) != cfg_.z_dim || z.dim(2) < 1)
    throw RuntimeFailure("Wan VAE decode: latents " + shape_str(z.shape()) + " are not [1, " +
                         std::to_string(cfg_.z_dim) + ", F, h, w]");
  const int64_t c = z.dim(1), latent_frames = z.dim(2), hw = z.dim(3) * z.dim(4);
  const int64_t f = cfg_.spatial_factor(), frames = 1 + cfg_.temporal_factor() * (latent_frames - 1);
  const int64_t out_hw = hw * f * f;
  Tensor out = Tensor::empty({1, cfg_.out_channels, frames, z.dim(3) * f, z.dim(4) * f});
  Cache cache;
  int64_t done = 0;
  for (int64_t i = 0; i < latent_frames; ++i) {
    Tensor zi = Tensor::empty({1, c, 1, z.dim(3), z.dim(4)});
    for (int64_t ch = 0; ch < c; ++ch)
      std::memcpy(zi.data() + ch * hw, z.data() + (ch * latent_frames + i) * hw, sizeof(float) * hw);
    const Tensor y = decode_frame(place_.put(zi), cache).to(Device::kCPU, DType::kF32);  // [1, out, t, H, W]
    const int64_t t = y.dim(2);
    for (int64_t ch = 0; ch < cfg_.out_channels; ++ch)
      std::memcpy(out.data() + (ch * frames + done) * out_hw, y.data() + ch * t * out_hw, sizeof(float) * t * out_hw);
    done += t;
  }
  return out;
}

namespace {

// One video's latent frames through one cache, a frame at a time whatever
// the chunk: (C, n, h, w) -> (frames, out_channels, H, W).
class WanStream final : public VaeDecoder::Stream {
 public:
  explicit WanStream(const AutoencoderKLWan& vae) : vae_(vae) {}
  Tensor next(const Tensor& latents) override {
    const int64_t zc = vae_.config().z_dim;
    if (latents.ndim() != 4 || latents.dim(0) != zc || latents.dim(1) < 1)
      throw RuntimeFailure("Wan VAE stream: latents " + shape_str(latents.shape()) + " are not [" +
                           std::to_string(zc) + ", n, h, w]");
    const int64_t n = latents.dim(1), h = latents.dim(2), w = latents.dim(3), hw = h * w;
    const int64_t f = vae_.config().spatial_factor(), oc = vae_.config().out_channels, out_hw = hw * f * f;
    const int64_t frames = (cache_.started ? 0 : 1 - vae_.config().temporal_factor()) + n * vae_.config().temporal_factor();
    Tensor out = Tensor::empty({frames, oc, h * f, w * f});
    int64_t done = 0;
    for (int64_t i = 0; i < n; ++i) {
      Tensor zi = Tensor::empty({1, zc, 1, h, w});
      for (int64_t ch = 0; ch < zc; ++ch)
        std::memcpy(zi.data() + ch * hw, latents.data() + (ch * n + i) * hw, sizeof(float) * hw);
      const Tensor y = vae_.decode_frame(vae_.placement().put(zi), cache_).to(Device::kCPU, DType::kF32);
      const int64_t t = y.dim(2);  // (1, oc, t, H, W) -> frames [done, done + t)
      for (int64_t fr = 0; fr < t; ++fr)
        for (int64_t ch = 0; ch < oc; ++ch)
          std::memcpy(out.data() + ((done + fr) * oc + ch) * out_hw, y.data() + (ch * t + fr) * out_hw,
                      sizeof(float) * out_hw);
      done += t;
    }
    if (done != frames) throw std::logic_error("Wan VAE stream: decoded frame count differs from the spec's");
    return out;
  }

 private:
  const AutoencoderKLWan& vae_;
  AutoencoderKLWan::Cache cache_;
};

}  // namespace

std::unique_ptr<VaeDecoder> AutoencoderKLWanSpec::load(const io::WeightStore& weights, const Placement& place) const {
  return std::make_unique<VaeDecoderOf<AutoencoderKLWan, WanStream>>(AutoencoderKLWan::load(weights, cfg_, place));
}

std::unique_ptr<VaeSpec> make_autoencoder_kl_wan_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<AutoencoderKLWanSpec>(cfg, path);
}

}  // namespace ditgen::models
