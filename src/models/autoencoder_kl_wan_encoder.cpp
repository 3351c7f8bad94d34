// AutoencoderKLWan's encoder forward, following diffusers 0.42.1's
// AutoencoderKLWan._encode / tiled_encode / WanEncoder3d / WanResample
// ("downsample2d", "downsample3d") / WanCausalConv3d, with the decoder's
// modules (models/nn/, models/wan_vae_blocks.h).
//
// The causal cache. diffusers keeps per causal conv the last CACHE_T = 2
// frames of its input (after a one-frame first chunk: that frame alone, so
// the next chunk's conv pads one zero frame in front of [frame | chunk]):
// every 3x3x3 conv sees its whole input stream behind two zero frames,
// which is nn::CausalConv3d on slots starting as zeros. A downsample3d's
// time conv caches its first chunk (one frame) and passes it unchanged;
// from the second chunk on it runs at stride 2 over [the last cached frame
// | chunk] (nn::CausalTimeDownsample). So frame 0 encodes to one latent
// frame, every later four frames to 4 / temporal_factor().
//
// The slots are allocated at the first chunk, at their exact sizes, before
// any activation (start_causal_cache; scales relative to the latent grid:
// f at conv_in, halving at every downsample); each level's staging buffer
// and the host blocks cached for its sizes are given back before the next
// (a quarter of the pixels) starts.
//
// Device-agnostic: every step is an op (ops::conv3d with strides,
// rms_norm_channels, copy_rows, gemm, attention) on the placement's
// device; only the chunks' input and the latents cross to the host.
#include "models/autoencoder_kl_wan_encoder.h"

#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

#include "models/nn/vae_patches.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

// Where each part of the encoder is stored.
const std::string kQuantConv = "quant_conv.";
const std::string kConvIn = "encoder.conv_in.";
const std::string kMidBlock = "encoder.mid_block.";
const std::string kNormOut = "encoder.norm_out.";
const std::string kConvOut = "encoder.conv_out.";
constexpr std::array<int64_t, 3> k3x3x3 = {3, 3, 3}, k1x1x1 = {1, 1, 1};

std::string down_block(int64_t index) { return "encoder.down_blocks." + std::to_string(index) + "."; }

// WanEncoder3d's dims: base_dim * [1] + dim_mult.
std::vector<int64_t> encoder_dims(const AutoencoderKLWanConfig& c) {
  std::vector<int64_t> d = {c.base_dim};
  for (const int64_t m : c.dim_mult) d.push_back(c.base_dim * m);
  return d;
}

// The down_blocks: for each level, its residual blocks (prefix, channels in
// and out), then its downsample (prefix, channels, temporal). Wan 2.1's are
// one flat list; Wan 2.2's (is_residual) one WanResidualDownBlock a level.
struct DownWalk {
  std::function<void(size_t level, const std::string& prefix, int64_t in, int64_t out)> resnet;
  std::function<void(size_t level, const std::string& prefix, int64_t channels, bool temporal)> downsample;
};

void walk_down_blocks(const AutoencoderKLWanConfig& c, const DownWalk& walk) {
  const std::vector<int64_t> dims = encoder_dims(c);
  int64_t index = 0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    const std::string level = down_block(static_cast<int64_t>(i));
    for (int64_t r = 0; r < c.num_res_blocks; ++r)
      walk.resnet(i, c.is_residual ? level + "resnets." + std::to_string(r) + "." : down_block(index++),
                  r == 0 ? dims[i] : dims[i + 1], dims[i + 1]);
    if (i + 2 < dims.size())
      walk.downsample(i, c.is_residual ? level + "downsampler." : down_block(index++), dims[i + 1],
                      c.temperal_downsample[i]);
  }
}

std::string resample(const std::string& prefix) { return prefix + "resample.1."; }
std::string time_conv(const std::string& prefix) { return prefix + "time_conv."; }

// What diffusers builds and this encoder cannot run.
void check_supported(const AutoencoderKLWanConfig& c) {
  if (c.num_res_blocks < 1)
    not_supported("a Wan VAE encoder with num_res_blocks 0 (its downsamples would take the previous level's channels)");
  if (AutoencoderKLWanEncoder::kChunkFrames % c.temporal_factor() != 0)
    not_supported("a Wan VAE encoder of temporal factor " + std::to_string(c.temporal_factor()) +
                  " (diffusers encodes 4 frames a chunk)");
}

// WanResidualDownBlock's AvgDown3D(in, out, ft, fs) as a conv3d at stride =
// kernel (ft, fs, fs): output channel o averages the group of in * ft fs^2 /
// out values k = ((c ft + a) fs + b) fs + d in [o group, (o + 1) group) (input
// channel c at frame offset a, pixel offset (b, d)). None when it is the
// identity.
void set_avg_shortcut(WanDownLevel& level, int64_t in, int64_t out, const Placement& place) {
  const int64_t ft = level.temporal ? 2 : 1, fs = level.downsample ? 2 : 1, group = in * ft * fs * fs / out;
  if (ft == 1 && fs == 1 && in == out) return;
  Tensor w = Tensor::zeros({out, in, ft, fs, fs});
  for (int64_t c = 0; c < in; ++c)
    for (int64_t a = 0; a < ft; ++a)
      for (int64_t b = 0; b < fs; ++b)
        for (int64_t d = 0; d < fs; ++d) {
          const int64_t k = ((c * ft + a) * fs + b) * fs + d, o = k / group;
          w.data()[(((o * in + c) * ft + a) * fs + b) * fs + d] = 1.0f / static_cast<float>(group);
        }
  level.avg_shortcut = true;
  level.avg_weight = place.put(w);
}

}  // namespace

nn::TensorDecls AutoencoderKLWanEncoder::encoder_tensors(const AutoencoderKLWanConfig& c) {
  const std::vector<int64_t> dims = encoder_dims(c);
  const int64_t z2 = 2 * c.z_dim, c_last = dims.back();
  nn::TensorDecls t = nn::CausalConv3d::tensors(kConvIn, dims[0], c.in_channels, k3x3x3);
  walk_down_blocks(c, {[&](size_t, const std::string& p, int64_t in, int64_t out) {
                         nn::append(t, nn::WanResidualBlock::tensors(p, in, out));
                       },
                       [&](size_t, const std::string& p, int64_t ch, bool temporal) {
                         nn::append(t, nn::Conv3d::tensors_2d(resample(p), ch, ch, 3));
                         if (temporal) nn::append(t, nn::CausalTimeDownsample::tensors(time_conv(p), ch));
                       }});
  nn::append(t, WanMidBlock::tensors(kMidBlock, c_last));
  nn::append(t, nn::ChannelRmsNorm::tensors(kNormOut, c_last, 3));
  nn::append(t, nn::CausalConv3d::tensors(kConvOut, z2, c_last, k3x3x3));
  nn::append(t, nn::Conv3d::tensors(kQuantConv, z2, z2, k1x1x1));
  return t;
}

void AutoencoderKLWanEncoder::check(const io::WeightStore& w, const AutoencoderKLWanConfig& c) {
  check_supported(c);
  check_declared_tensors(w, encoder_tensors(c), {"encoder.", "quant_conv."},
                         "dim_mult, num_res_blocks, temperal_downsample");
}

AutoencoderKLWanEncoder AutoencoderKLWanEncoder::load(const io::WeightStore& w, const AutoencoderKLWanConfig& c,
                                                      const Placement& place) {
  check(w, c);  // every name and shape, before anything is loaded
  const std::vector<int64_t> dims = encoder_dims(c);
  const int64_t z2 = 2 * c.z_dim, c_last = dims.back();
  AutoencoderKLWanEncoder m;
  m.place_ = place;
  m.cfg_ = c;
  m.conv_in_ = nn::CausalConv3d::load(w, kConvIn, dims[0], c.in_channels, k3x3x3, place);
  m.levels_.resize(dims.size() - 1);
  walk_down_blocks(c, {[&](size_t i, const std::string& p, int64_t in, int64_t out) {
                         m.levels_[i].resnets.push_back(nn::WanResidualBlock::load(w, p, in, out, place));
                       },
                       [&](size_t i, const std::string& p, int64_t ch, bool temporal) {
                         WanDownLevel& level = m.levels_[i];
                         level.downsample = true;
                         level.temporal = temporal;
                         level.resample = nn::Conv3d::load_2d(w, resample(p), ch, ch, 3, place);
                         if (temporal) level.time_conv = nn::CausalTimeDownsample::load(w, time_conv(p), ch, place);
                       }});
  if (c.is_residual)
    for (size_t i = 0; i < m.levels_.size(); ++i) set_avg_shortcut(m.levels_[i], dims[i], dims[i + 1], place);
  m.mid_ = WanMidBlock::load(w, kMidBlock, c_last, place);
  m.norm_out_ = nn::ChannelRmsNorm::load(w, kNormOut, c_last, 3, place);
  m.conv_out_ = nn::CausalConv3d::load(w, kConvOut, z2, c_last, k3x3x3, place);
  m.quant_ = nn::Conv3d::load(w, kQuantConv, z2, z2, k1x1x1, place);

  // The slots in the order encode_chunk runs the causal convs (diffusers'
  // feat_idx order), scales against the latent grid.
  int64_t scale = c.network_factor();
  m.slots_.push_back({m.conv_in_.in_channels(), scale});
  for (const WanDownLevel& level : m.levels_) {
    for (const nn::WanResidualBlock& r : level.resnets)
      for (const int64_t ch : r.causal_inputs()) m.slots_.push_back({ch, scale});
    if (!level.downsample) continue;
    scale /= 2;
    if (level.temporal) m.slots_.push_back({level.time_conv.in_channels(), scale});  // after the spatial downsample
  }
  for (const nn::WanResidualBlock* r : {&m.mid_.resnet0(), &m.mid_.resnet1()})
    for (const int64_t ch : r->causal_inputs()) m.slots_.push_back({ch, scale});
  m.slots_.push_back({m.conv_out_.in_channels(), scale});
  return m;
}

Tensor AutoencoderKLWanEncoder::downsample(Tensor x, const WanDownLevel& level, Cache& cache) const {
  const int64_t c = x.dim(1), t = x.dim(2), h = x.dim(3), w = x.dim(4);
  // ZeroPad2d((0, 1, 0, 1)) of every frame: one zero row below, one zero
  // column right; then the 3x3 conv at stride 2 on every frame at once.
  Tensor padded;
  {
    profile::ScopedTimer timer("vae.downsample");
    padded = Tensor::zeros({1, c, t, h + 1, w + 1}, place_.device, place_.storage());
    for (int64_t y = 0; y < h; ++y)
      ops::copy_rows(x, y * w, h * w, padded, y * (w + 1), (h + 1) * (w + 1), c * t, w);
  }
  x = Tensor();
  {
    profile::ScopedTimer timer("vae.conv2d");
    x = ops::conv3d(padded, level.resample.weight, &level.resample.bias, {1, 2, 2}, {0, 0, 0});
  }
  if (level.temporal) x = level.time_conv(std::move(x), cache, place_);
  return x;
}

Tensor AutoencoderKLWanEncoder::avg_down(const Tensor& x, const WanDownLevel& level) const {
  profile::ScopedTimer timer("vae.residual");
  const std::array<int64_t, 3> k = {level.avg_weight.dim(2), level.avg_weight.dim(3), level.avg_weight.dim(4)};
  const int64_t c = x.dim(1), t = x.dim(2), hw = x.dim(3) * x.dim(4), pad = (k[0] - t % k[0]) % k[0];
  if (pad == 0) return ops::conv3d(x, level.avg_weight, nullptr, k, {0, 0, 0});
  // AvgDown3D pads the frames to whole groups with zero frames in front.
  Tensor padded = Tensor::zeros({1, c, t + pad, x.dim(3), x.dim(4)}, place_.device, place_.storage());
  ops::copy_rows(x, 0, t * hw, padded, pad * hw, (t + pad) * hw, c, t * hw);
  return ops::conv3d(padded, level.avg_weight, nullptr, k, {0, 0, 0});
}

Tensor AutoencoderKLWanEncoder::encode_chunk(const Tensor& x, Cache& cache) const {
  const int64_t f = cfg_.network_factor(), frames = cache.started ? kChunkFrames : 1;
  if (x.ndim() != 5 || x.dim(0) != 1 || x.dim(1) != cfg_.in_channels || x.dim(2) != frames || x.dim(3) < f ||
      x.dim(4) < f || x.dim(3) % f != 0 || x.dim(4) % f != 0)
    throw RuntimeFailure(std::string(kNames.model) + ": chunk " + shape_str(x.shape()) + " is not [1, " +
                         std::to_string(cfg_.in_channels) + ", " + std::to_string(frames) +
                         ", H, W] with H and W multiples of " + std::to_string(f));
  cache.next = 0;
  if (!cache.started) {
    cache.h = x.dim(3) / f;
    cache.w = x.dim(4) / f;
    start_causal_cache(cache, slots_, nn::CausalPad::kZeros, place_);
  } else if (x.dim(3) != cache.h * f || x.dim(4) != cache.w * f) {
    throw RuntimeFailure(std::string(kNames.model) + ": a chunk of " + std::to_string(x.dim(3)) + "x" +
                         std::to_string(x.dim(4)) + " after chunks of " + std::to_string(cache.h * f) + "x" +
                         std::to_string(cache.w * f));
  }
  Tensor h = conv_in_(x, cache, place_);
  for (const WanDownLevel& level : levels_) {
    // WanResidualDownBlock: x + AvgDown3D(its input), the shortcut made first (it is the smaller).
    const Tensor shortcut = level.avg_shortcut ? avg_down(h, level) : Tensor();
    const bool identity_shortcut = cfg_.is_residual && !level.avg_shortcut;
    const Tensor input = identity_shortcut ? h : Tensor();
    for (const nn::WanResidualBlock& r : level.resnets) h = r(std::move(h), cache, place_);
    if (level.downsample) h = downsample(std::move(h), level, cache);
    if (level.avg_shortcut || identity_shortcut) {
      profile::ScopedTimer t("vae.residual");
      ops::add_(h, level.avg_shortcut ? shortcut : input);
    }
    if (!level.downsample) continue;
    // The next level works at a quarter of the pixels: this one's staging
    // buffer and the host blocks cached for its sizes go back now.
    cache.staging = Tensor();
    device_memory::release_cached_host();
  }
  h = mid_(std::move(h), cache);
  {
    profile::ScopedTimer t("vae.rms_norm");
    h = norm_out_(h, true);
  }
  h = conv_out_(std::move(h), cache, place_);
  cache.staging = Tensor();
  end_causal_call(cache, kNames);
  profile::ScopedTimer t("vae.quant_conv");
  return quant_(h);  // 1x1x1: no cache
}

Tensor AutoencoderKLWanEncoder::encode_region(const Tensor& video, int64_t y0, int64_t th, int64_t x0,
                                              int64_t tw) const {
  const int64_t frames = video.dim(1), f = cfg_.network_factor(), z = cfg_.z_dim;
  const int64_t per_chunk = kChunkFrames / cfg_.temporal_factor();
  const int64_t latent_frames = 1 + (frames - 1) / kChunkFrames * per_chunk, hw = (th / f) * (tw / f);
  Tensor out = Tensor::empty({z, latent_frames, th / f, tw / f});
  Cache cache;
  int64_t done = 0;
  for (int64_t f0 = 0; f0 < frames; f0 += (f0 == 0 ? 1 : kChunkFrames)) {
    const int64_t n = f0 == 0 ? 1 : kChunkFrames;
    const Tensor chunk = nn::region_of(video, f0, n, y0, th, x0, tw);
    const Tensor params =
        encode_chunk(place_.put(chunk.reshape({1, chunk.dim(0), n, th, tw})), cache).to(Device::kCPU, DType::kF32);
    const int64_t t = params.dim(2);  // (1, 2z, t, th/f, tw/f): the mean is the first z channels
    if (params.dim(1) != 2 * z || done + t > latent_frames || params.numel() != 2 * z * t * hw)
      throw std::logic_error(std::string(kNames.model) + ": encoded " + shape_str(params.shape()) +
                             " differs from the config's latent frames");
    for (int64_t c = 0; c < z; ++c)
      std::memcpy(out.data() + (c * latent_frames + done) * hw, params.data() + c * t * hw,
                  sizeof(float) * static_cast<size_t>(t * hw));
    done += t;
  }
  if (done != latent_frames) throw std::logic_error(std::string(kNames.model) + ": encoded fewer latent frames");
  return out;
}

Tensor AutoencoderKLWanEncoder::encode_mode(const Tensor& video, const std::optional<nn::TileGrid>& tiles) const {
  const int64_t f = cfg_.spatial_factor(), p = cfg_.patch_size, channels = cfg_.in_channels / (p * p);
  if (video.ndim() != 4 || video.dim(0) != channels || video.dim(1) < 1 ||
      (video.dim(1) - 1) % kChunkFrames != 0 || video.dim(2) < f || video.dim(3) < f || video.dim(2) % f != 0 ||
      video.dim(3) % f != 0 || video.device() != Device::kCPU || video.dtype() != DType::kF32)
    throw RuntimeFailure(std::string(kNames.model) + ": video " + shape_str(video.shape()) + " is not a host float32 [" +
                         std::to_string(channels) + ", 1 + " + std::to_string(kChunkFrames) +
                         "k, H, W] with H and W multiples of " + std::to_string(f));
  // From here on in patches (diffusers' patchify, then _encode or tiled_encode).
  const Tensor x = p == 1 ? video
                          : nn::patchify_pixels(video.reshape({1, channels, video.dim(1), video.dim(2), video.dim(3)}), p)
                                .reshape({cfg_.in_channels, video.dim(1), video.dim(2) / p, video.dim(3) / p});
  const int64_t height = x.dim(2), width = x.dim(3), nf = cfg_.network_factor();
  if (!tiles) return encode_region(x, 0, height, 0, width);
  // The caller's grid is encode_tile_grid(sizes, f): tiles of sizes every
  // strides; diffusers reads those in patches, its latents nf patches each.
  const nn::TileGrid grid = nn::encode_tile_grid(
      {tiles->height.latent_size, tiles->width.latent_size, tiles->height.latent_stride, tiles->width.latent_stride},
      nf);
  for (const nn::TileAxis* axis : {&grid.height, &grid.width})
    if (axis->latent_size % nf != 0 || axis->latent_stride % nf != 0 || axis->latent_stride < nf)
      throw RuntimeFailure(std::string(kNames.model) + ": tiles of " + std::to_string(axis->latent_size) +
                           (p == 1 ? " pixels" : " patches") + " every " + std::to_string(axis->latent_stride) +
                           ": not multiples of " + std::to_string(nf) + " (the encoder tiles in whole latents)");
  const int64_t z = cfg_.z_dim, latent_frames = 1 + (x.dim(1) - 1) / kChunkFrames * (kChunkFrames / cfg_.temporal_factor());
  Tensor out = Tensor::empty({z, latent_frames, height / nf, width / nf});
  Tensor planes = out.reshape({z * latent_frames, height / nf, width / nf});
  nn::assemble_tiles(grid, height, width, planes, [&](int64_t y0, int64_t th, int64_t x0, int64_t tw) {
    Tensor tile = encode_region(x, y0, th, x0, tw);
    device_memory::release_cached_host();  // the edge tiles are smaller
    return tile.reshape({z * latent_frames, th / nf, tw / nf});
  });
  return out;
}

Tensor AutoencoderKLWanEncoder::encode(const Tensor& video, const std::optional<nn::TileGrid>& tiles) const {
  Tensor latents = encode_mode(video, tiles);
  const int64_t z = cfg_.z_dim, per_channel = latents.numel() / z;
  // WanImageToVideoPipeline: (mode - latents_mean) * (1 / latents_std), the reciprocal in float32.
  for (int64_t c = 0; c < z; ++c) {
    const float mean = cfg_.latents_mean[static_cast<size_t>(c)];
    const float inv_std = 1.0f / cfg_.latents_std[static_cast<size_t>(c)];
    float* p = latents.data() + c * per_channel;
    for (int64_t i = 0; i < per_channel; ++i) p[i] = (p[i] - mean) * inv_std;
  }
  return latents;
}

std::unique_ptr<VaeEncoder> AutoencoderKLWanSpec::load_encoder(const io::WeightStore& weights,
                                                               const Placement& place) const {
  return std::make_unique<AutoencoderKLWanEncoder>(AutoencoderKLWanEncoder::load(weights, cfg_, place));
}

}  // namespace ditgen::models
