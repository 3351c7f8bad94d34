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
// nn::CausalConv3d (models/nn/causal_conv3d.h: [cache | chunk] along time,
// ops::conv3d with time padding 0, the last two frames of that input kept).
// The (3, 1, 1) time conv of an upsample3d is skipped on the first latent
// frame (diffusers' "Rep" marker: the chunk keeps its one frame) and from
// the second on is the same causal conv over the stream of its inputs from
// the second frame, its cache starting at zeros (diffusers: zeros and the
// frame when "Rep" was set, then the usual rule). So latent frame 0 decodes to 1 frame, every later
// one to 2^(temporal upsamplers) = 4, and feeding the frames one by one is
// diffusers' decode of the whole video.
//
// Wan 2.2's residual up blocks (is_residual): the block's input is held
// (a handle: no op writes into its input) until the upsampler is done, then
// dup_up makes DupUp3D of it: per time phase, the output channels' source
// channels gathered (one copy_rows per run of channels at a steady step),
// nearest x2 (both columns of a pixel pair share a channel: the repeats
// are even), and, when the row phase changes the channel, the two row
// phases' rows interleaved; the time phases interleaved as frames. The
// first latent frame keeps only the last time phase (first_chunk), as the
// main path's skipped time conv keeps one frame.
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
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/model_dir.h"
#include "models/nn/vae_patches.h"
#include "models/wan_vae_names.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"

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

// Where each part of the decoder is stored, written once: the declarations
// and the load both follow these.
const std::string kPostQuantConv = "post_quant_conv.";
const std::string kConvIn = "decoder.conv_in.";
const std::string kMidBlock = "decoder.mid_block.";
const std::string kNormOut = "decoder.norm_out.";
const std::string kConvOut = "decoder.conv_out.";
constexpr std::array<int64_t, 3> k3x3x3 = {3, 3, 3}, k1x1x1 = {1, 1, 1}, kTimeKernel = {3, 1, 1};


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

// The up blocks' channels (WanDecoder3d): block i goes to dims[i + 1], the
// first from dims[0], every later one from the previous block's upsampled
// C/2 (Wan 2.1) or C (is_residual: its upsampler keeps the channels).
UpBlockChannels up_block_channels(const AutoencoderKLWanConfig& cfg) {
  const std::vector<int64_t> dims = cfg.dims();
  UpBlockChannels c;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    c.in.push_back(i == 0 || cfg.is_residual ? dims[i] : dims[i] / 2);
    c.out.push_back(dims[i + 1]);
  }
  return c;
}

// The upsampler's conv output channels: C/2 (Wan 2.1), C (is_residual).
int64_t resample_out(const AutoencoderKLWanConfig& cfg, int64_t channels) {
  return cfg.is_residual ? channels : channels / 2;
}

// Where an up block's upsampler is stored: a ModuleList (Wan 2.1's
// WanUpBlock) or one module (WanResidualUpBlock).
std::string upsampler(const AutoencoderKLWanConfig& cfg, const std::string& up_block) {
  return up_block + (cfg.is_residual ? "upsampler." : "upsamplers.0.");
}

// DupUp3D's channel repeats for up block i: cout * factor / cin, what
// diffusers asserts whole. Odd repeats would take a pixel's two columns
// from different channels, which dup_up does not do.
int64_t dup_repeats(const AutoencoderKLWanConfig& cfg, const UpBlockChannels& up, size_t i) {
  return up.out[i] * (cfg.temporal_upsample(i) ? 8 : 4) / up.in[i];
}

void check_residual_shortcuts(const AutoencoderKLWanConfig& cfg, const std::string& path) {
  const UpBlockChannels up = up_block_channels(cfg);
  for (size_t i = 0; i + 1 < up.out.size(); ++i) {
    const int64_t factor = cfg.temporal_upsample(i) ? 8 : 4;
    require(up.out[i] * factor % up.in[i] == 0, path,
            "dim_mult: up block " + std::to_string(i) + "'s DupUp3D shortcut cannot repeat " +
                std::to_string(up.in[i]) + " channels into " + std::to_string(up.out[i]) + " x " +
                std::to_string(factor));
    if (dup_repeats(cfg, up, i) % 2 != 0)
      not_supported(path + ": is_residual true with dim_mult " + nlohmann::json(cfg.dim_mult).dump() + " (up block " +
                    std::to_string(i) + "'s DupUp3D repeats its channels an odd number of times)");
  }
  // The encoder's AvgDown3D shortcuts: in * factor must split into out groups.
  const int64_t levels = static_cast<int64_t>(cfg.dim_mult.size());
  int64_t in = cfg.base_dim;
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t out = cfg.base_dim * cfg.dim_mult[static_cast<size_t>(i)];
    const bool last = i + 1 == levels;
    const int64_t factor = last ? 1 : (cfg.temperal_downsample[static_cast<size_t>(i)] ? 8 : 4);
    require(in * factor % out == 0, path,
            "dim_mult: down block " + std::to_string(i) + "'s AvgDown3D shortcut cannot average " +
                std::to_string(in) + " x " + std::to_string(factor) + " values into " + std::to_string(out) +
                " channels");
    in = out;
  }
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

  c.is_residual = get_bool_or(cfg, "is_residual", false, path);
  // patch_size null / absent: no patches (diffusers).
  c.patch_size = get_int_or(cfg, "patch_size", 1, path);
  // The message only when it fails: cfg is const, and operator[] of a key
  // it lacks (patch_size absent) is undefined (the fuzz target found it).
  if (c.patch_size < 1)
    require(false, path, "patch_size: expected a positive integer or null, got " + cfg.at("patch_size").dump());
  if (c.patch_size > 2)
    not_supported(path + ": patch_size " + cfg.at("patch_size").dump() + " (only null, 1 and 2: Wan 2.2 TI2V's)");
  const int64_t per_patch = c.patch_size * c.patch_size;
  for (const auto& [key, channels] : {std::pair{"in_channels", c.in_channels}, {"out_channels", c.out_channels}})
    require(channels % per_patch == 0, path,
            std::string(key) + ": " + std::to_string(channels) + " is not a multiple of patch_size^2 = " +
                std::to_string(per_patch) + " (the patches' pixels are channels)");
  // clip_output (Wan 2.2's configs: false) is not a key of diffusers 0.42.1's
  // AutoencoderKLWan: it clamps anyway, and so does ditgen's pipeline.
  (void)get_bool_or(cfg, "clip_output", true, path);
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

  if (c.is_residual) check_residual_shortcuts(c, path);

  // The pipeline's factors (WanPipeline reads these keys) must be the
  // decoder's own.
  const int64_t sf = get_int_or(cfg, "scale_factor_spatial", c.spatial_factor(), path);
  const int64_t tf = get_int_or(cfg, "scale_factor_temporal", c.temporal_factor(), path);
  require(sf == c.spatial_factor(), path,
          "scale_factor_spatial: " + std::to_string(sf) + ", but the decoder upsamples by " +
              std::to_string(c.spatial_factor()) + " (2^(len(dim_mult) - 1) x patch_size)");
  require(tf == c.temporal_factor(), path,
          "scale_factor_temporal: " + std::to_string(tf) + ", but the decoder's time upsampling gives " +
              std::to_string(c.temporal_factor()) + " (2^(true entries of temperal_downsample))");
  return c;
}

nn::TensorDecls AutoencoderKLWan::decoder_tensors(const AutoencoderKLWanConfig& c) {
  const std::vector<int64_t> dims = c.dims();
  const UpBlockChannels up = up_block_channels(c);
  const int64_t z = c.z_dim, c0 = dims[0], c_last = dims.back();
  nn::TensorDecls t = nn::Conv3d::tensors(kPostQuantConv, z, z, k1x1x1);
  nn::append(t, nn::CausalConv3d::tensors(kConvIn, c0, z, k3x3x3));
  nn::append(t, WanMidBlock::tensors(kMidBlock, c0));
  walk_up_blocks(
      up, c.num_res_blocks + 1,
      [&](const UpResnet& r) { nn::append(t, nn::WanResidualBlock::tensors(r.prefix, r.cin, r.cout)); },
      [&](size_t i, const std::string& ub) {
        if (i + 1 == up.out.size()) return;
        const int64_t ch = up.out[i];
        const std::string us = upsampler(c, ub);
        if (c.temporal_upsample(i)) nn::append(t, nn::CausalConv3d::tensors(us + "time_conv.", 2 * ch, ch, kTimeKernel));
        nn::append(t, nn::UpsampleConv2d::tensors(us + "resample.1.", resample_out(c, ch), ch));
      });
  nn::append(t, nn::ChannelRmsNorm::tensors(kNormOut, c_last, 3));
  nn::append(t, nn::CausalConv3d::tensors(kConvOut, c.out_channels, c_last, k3x3x3));
  return t;
}

void AutoencoderKLWan::check(const io::WeightStore& w, const AutoencoderKLWanConfig& c) {
  // A decoder tensor the config does not account for means config and
  // weights disagree (another num_res_blocks, dim_mult or temperal_downsample).
  check_decoder_tensors(w, decoder_tensors(c), "dim_mult, num_res_blocks, temperal_downsample");
}

AutoencoderKLWan AutoencoderKLWan::load(const io::WeightStore& w, const AutoencoderKLWanConfig& c,
                                        const Placement& place) {
  check(w, c);  // every name and shape, before anything is loaded
  const std::vector<int64_t> dims = c.dims();
  const UpBlockChannels up = up_block_channels(c);
  const int64_t z = c.z_dim, c0 = dims[0], c_last = dims.back();
  AutoencoderKLWan m;
  m.place_ = place;
  m.cfg_ = c;
  m.post_quant_ = nn::Conv3d::load(w, kPostQuantConv, z, z, k1x1x1, place);
  m.conv_in_ = nn::CausalConv3d::load(w, kConvIn, c0, z, k3x3x3, place);
  m.mid_ = WanMidBlock::load(w, kMidBlock, c0, place);
  m.up_blocks_ = load_up_blocks<WanUpBlock>(
      up, c.num_res_blocks + 1,
      [&](const UpResnet& r) { return nn::WanResidualBlock::load(w, r.prefix, r.cin, r.cout, place); },
      [&](size_t i, const std::string& ub, WanUpBlock& blk) {
        if (i + 1 == up.out.size()) return;  // the last block: no upsampler
        const int64_t ch = up.out[i];
        blk.upsample = true;
        blk.temporal = c.temporal_upsample(i);
        blk.dup_shortcut = c.is_residual;
        const std::string us = upsampler(c, ub);
        if (blk.temporal)
          blk.time_conv = nn::CausalConv3d::load(w, us + "time_conv.", 2 * ch, ch, kTimeKernel, place);
        blk.resample = nn::UpsampleConv2d::load(w, us + "resample.1.", resample_out(c, ch), ch, place);
      });
  m.norm_out_ = nn::ChannelRmsNorm::load(w, kNormOut, c_last, 3, place);
  m.conv_out_ = nn::CausalConv3d::load(w, kConvOut, c.out_channels, c_last, k3x3x3, place);
  // diffusers' feat_idx order; an upsample3d's time conv after its block's
  // residual blocks.
  m.slots_ = decoder_causal_slots<nn::WanResidualBlock>(
      m.conv_in_, {&m.mid_.resnet0(), &m.mid_.resnet1()}, m.up_blocks_, m.conv_out_,
      [](const WanUpBlock& b) { return b.temporal ? &b.time_conv : nullptr; });
  return m;
}

Tensor AutoencoderKLWan::upsample(Tensor x, const WanUpBlock& b, Cache& cache) const {
  if (b.temporal) {
    if (!cache.started) {
      ++cache.next;  // the first latent frame skips the time conv (diffusers' "Rep"): its slot stays zeros
    } else {
      const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
      const Tensor z = b.time_conv(std::move(x), cache, place_);  // [1, 2C, T, H, W]
      // out[:, ch, 2 tt + j] = z[:, j C + ch, tt].
      profile::ScopedTimer timer("vae.upsample");
      x = place_.empty({1, c, 2 * t, h, w});
      for (int64_t j = 0; j < 2; ++j) ops::copy_rows(z, j * c * t * hw, hw, x, j * hw, 2 * hw, c * t, hw);
    }
  }
  // Per frame: nearest-exact x2 (= nearest for x2) and the 3x3 conv to C/2.
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  const int64_t co = b.resample.out_channels(), ohw = 4 * hw;
  auto one_frame = [&](const Tensor& frame) {  // [1, C, H, W] -> [1, C/2, 2H, 2W]
    profile::ScopedTimer timer("vae.upsample");
    return b.resample(frame);
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

namespace {

// dst planes [0, n) = src's channel planes at `channels` (each `plane`
// values), one copy_rows per run of channels at a steady positive step.
void gather_planes(const Tensor& src, const std::vector<int64_t>& channels, int64_t plane, Tensor& dst) {
  const int64_t n = static_cast<int64_t>(channels.size());
  for (int64_t o = 0; o < n;) {
    const int64_t c0 = channels[static_cast<size_t>(o)];
    const int64_t step = o + 1 < n ? channels[static_cast<size_t>(o + 1)] - c0 : 1;
    int64_t run = 1;
    while (step > 0 && o + run < n && channels[static_cast<size_t>(o + run)] == c0 + run * step) ++run;
    ops::copy_rows(src, c0 * plane, step * plane, dst, o * plane, plane, run, plane);
    o += run;
  }
}

}  // namespace

Tensor AutoencoderKLWan::dup_up(const Tensor& x, int64_t cout, int64_t factor_t, bool first_chunk) const {
  profile::ScopedTimer timer("vae.upsample");
  const int64_t cin = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4), plane = t * h * w, ohw = 4 * h * w;
  // DupUp3D: channel k of the repeated input (k / repeats of x) is output
  // channel o at phase (a, b, d), k = ((o factor_t + a) 2 + b) 2 + d: frame
  // t factor_t + a, pixel (2y + b, 2x + d). repeats is even (the config
  // checks it), so d never changes the channel: nearest x2 gives both
  // columns.
  const int64_t repeats = cout * factor_t * 4 / cin;
  auto channel = [&](int64_t o, int64_t a, int64_t b) { return ((o * factor_t + a) * 2 + b) * 2 / repeats; };
  // first_chunk: diffusers keeps frames [factor_t - 1, ...): of one input frame, phase a = factor_t - 1 alone.
  const int64_t a0 = first_chunk ? factor_t - 1 : 0, phases = factor_t - a0;
  Tensor out = phases > 1 ? place_.empty({1, cout, t * phases, 2 * h, 2 * w}) : Tensor();
  Tensor gathered = place_.empty({1, cout * t, h, w});
  for (int64_t a = a0; a < factor_t; ++a) {
    std::vector<int64_t> rows[2];  // the channel of each output channel, at row phase b
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t o = 0; o < cout; ++o) rows[b].push_back(channel(o, a, b));
    // This phase's frames (1, cout, t, 2h, 2w).
    Tensor y;
    if (rows[0] == rows[1]) {  // repeats a multiple of 4: nearest x2 is the whole phase
      gather_planes(x, rows[0], plane, gathered);
      y = ops::upsample_nearest(gathered, 2).reshape({1, cout, t, 2 * h, 2 * w});
    } else {  // rows 2y + b from row phase b's channels
      y = place_.empty({1, cout, t, 2 * h, 2 * w});
      for (int64_t b = 0; b < 2; ++b) {
        gather_planes(x, rows[b], plane, gathered);
        const Tensor up = ops::upsample_nearest(gathered, 2);  // (1, cout t, 2h, 2w)
        ops::copy_rows(up, b * 2 * w, 4 * w, y, b * 2 * w, 4 * w, cout * t * h, 2 * w);
      }
    }
    if (phases == 1) return y;
    // Frame tt of y is frame tt factor_t + a of the block.
    ops::copy_rows(y, 0, ohw, out, (a - a0) * ohw, phases * ohw, cout * t, ohw);
  }
  return out;
}

Tensor AutoencoderKLWan::to_pixels(Tensor frames, bool frames_first) const {
  const int64_t p = cfg_.patch_size;
  if (p == 1) return frames;
  if (!frames_first) return nn::unpatchify_pixels(frames, p);
  // (T, C p^2, h, w) as (T, C p^2, 1, h, w).
  const int64_t t = frames.dim(0), c = frames.dim(1), h = frames.dim(2), w = frames.dim(3);
  return nn::unpatchify_pixels(frames.reshape({t, c, 1, h, w}), p).reshape({t, c / (p * p), h * p, w * p});
}

Tensor AutoencoderKLWan::decode_chunk(const Tensor& z, Cache& cache) const {
  if (begin_causal_call(cache, z, cfg_.z_dim, 1, kNames))
    start_causal_cache(cache, slots_, nn::CausalPad::kZeros, place_);
  Tensor x;
  {
    profile::ScopedTimer t("vae.conv_in");
    x = post_quant_(z);  // 1x1x1: no cache
  }
  x = conv_in_(std::move(x), cache, place_);
  x = mid_(std::move(x), cache);
  for (const WanUpBlock& blk : up_blocks_) {
    // WanResidualUpBlock's shortcut input (no op writes into its input).
    const Tensor block_in = blk.dup_shortcut ? x : Tensor();
    const bool first_chunk = !cache.started;
    for (const nn::WanResidualBlock& r : blk.resnets) x = r(std::move(x), cache, place_);
    if (!blk.upsample) continue;  // the last block: conv_out works at its size
    x = upsample(std::move(x), blk, cache);
    if (blk.dup_shortcut) {
      const Tensor shortcut = dup_up(block_in, x.dim(1), blk.temporal ? 2 : 1, first_chunk);
      profile::ScopedTimer t("vae.residual");
      ops::add_(x, shortcut);
    }
    // The next block works at 4x the pixels: this one's staging buffer and
    // the host blocks cached for its sizes could not hold its, so they go
    // back now.
    cache.staging = Tensor();
    device_memory::release_cached_host();
  }
  {
    profile::ScopedTimer t("vae.rms_norm");
    x = norm_out_(x, true);
  }
  x = conv_out_(std::move(x), cache, place_);
  cache.staging = Tensor();
  end_causal_call(cache, kNames);
  return x;
}

ChunkedDecode AutoencoderKLWan::chunked(int64_t latent_frames, const Cache& cache, bool stream) const {
  // The first latent frame of a cache makes 1 frame, every later one
  // temporal_factor().
  const int64_t tf = cfg_.temporal_factor();
  return {std::vector<int64_t>(static_cast<size_t>(latent_frames), 1),
          (cache.started ? 0 : 1 - tf) + latent_frames * tf, cfg_.out_channels, cfg_.network_factor(), stream};
}

io::SingleFileOptions AutoencoderKLWanSpec::single_file_options() const {
  io::SingleFileOptions o;
  o.other_naming_probe = "decoder.conv1.weight";  // diffusers': decoder.conv_in.weight
  if (cfg_.is_residual) {
    o.rename = [](const std::string& name) { return wan22_vae_original_to_diffusers(name); };
    return o;
  }
  o.rename = [per_block = cfg_.num_res_blocks + 1, blocks = static_cast<int64_t>(cfg_.dim_mult.size())](
                 const std::string& name) { return wan_vae_original_to_diffusers(name, per_block, blocks); };
  return o;
}

std::unique_ptr<VaeSpec> make_autoencoder_kl_wan_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<AutoencoderKLWanSpec>(cfg, path);
}

double AutoencoderKLWanSpec::decode_bytes(int64_t h, int64_t w) const {
  const std::vector<int64_t> dims = cfg_.dims();
  // Full resolution is the decoder's own (patches, for a patch_size).
  const int64_t f = cfg_.network_factor(), r = cfg_.num_res_blocks;
  // Cached floats per full-resolution pixel: at the latent level conv_in
  // and the mid block's two residual blocks; then per up block its residual
  // blocks' convs (the first takes the block's input channels), a temporal
  // upsampler's time conv; conv_out at full resolution.
  double share = 1.0 / static_cast<double>(f * f);  // the level's pixels per full-resolution pixel
  double cached = 2.0 * static_cast<double>(cfg_.z_dim + 4 * dims[0]) * share;
  const UpBlockChannels up = up_block_channels(cfg_);
  for (size_t i = 0; i < up.out.size(); ++i) {
    const bool upsamples = i + 1 < up.out.size();
    int64_t inputs = up.in[i] + up.out[i] + 2 * r * up.out[i];
    if (upsamples && cfg_.temporal_upsample(i)) inputs += up.out[i];
    cached += 2.0 * static_cast<double>(inputs) * share;
    if (upsamples) share *= 4;
  }
  cached += 2.0 * static_cast<double>(dims.back());
  double transient = 7.0 * static_cast<double>(cfg_.temporal_factor() * dims.back());
  // is_residual: the last upsampling block ends at full resolution holding
  // its upsampled output, the DupUp3D shortcut and the nearest x2 it is
  // made from (not measured).
  if (cfg_.is_residual && up.out.size() >= 2)
    transient = std::max(transient, 3.0 * static_cast<double>(cfg_.temporal_factor() * up.out[up.out.size() - 2]));
  return 4.0 * static_cast<double>(h * f * w * f) * (cached + transient);
}

}  // namespace ditgen::models
