// AutoencoderKLCogVideoX decoder forward, following diffusers 0.42.1's
// AutoencoderKLCogVideoX._decode / CogVideoXDecoder3D / CogVideoXMidBlock3D /
// CogVideoXUpBlock3D / CogVideoXResnetBlock3D / CogVideoXSpatialNorm3D /
// CogVideoXCausalConv3d (models/autoencoders/autoencoder_kl_cogvideox.py) and
// CogVideoXUpsample3D (models/upsampling.py).
//
// Chunks. diffusers decodes the latent frames in batches of two, the odd
// remainder joining the first batch (13 latent frames: 3, 2, 2, 2, 2, 2),
// one decoder call per batch, carrying conv_cache between calls. Each
// GroupNorm's statistics span the frames of its call, and the upsamplers and
// spatial norms treat an odd frame count specially, so the chunking is part
// of the result: the spec hands the pipeline exactly these chunks
// (latent_chunks), and decode() uses them too.
//
// The conv cache. A CogVideoXCausalConv3d (kernel 3 in time; pad_mode
// "first", which takes the "constant" path) puts, in front of its chunk,
// the cached last two frames of its previous input, or, on the first chunk,
// two copies of the chunk's first frame (not zeros, unlike Wan's), then runs
// a 3x3x3 conv with time padding 0 and spatial zero padding 1, and caches
// the last two frames of that padded input. Here each causal conv has a
// two-frame slot, allocated at the first chunk, and every call runs
// nn::CausalConv3d (models/nn/causal_conv3d.h, CausalPad::kFirstFrame: [slot |
// chunk], or [first, first | chunk], in the level's staging buffer, its last
// two frames kept, then ops::conv3d), as Wan's VAE does with zeros. conv_y and
// conv_b are causal convs of kernel 1: no padding, and their cache (diffusers
// keeps the whole input) is never read, so they are plain 1x1x1 convs.
//
// The spatial norm (nn::CogVideoXSpatialNorm, models/nn/causal_resnet.h):
// GroupNorm(f) (eps 1e-6 whatever norm_eps says, as diffusers builds it) *
// conv_y(zq) + conv_b(zq), zq nearest-resized to f's frames and pixels, then
// SiLU (every spatial norm of the decoder is followed by one).
//
// Memory: one chunk's activations (at most 8 output frames at the last level
// for a pair; 9 for the first chunk of an odd count) plus the caches (2
// frames per causal conv at its level's size), never the video's length.
// Intermediates are released as soon as they are consumed; the staging buffer
// and the host blocks cached for a level's sizes are given back before the
// next level (4x the pixels) starts, as for Wan's VAE, after a resnet's
// channel change (CogVideoXResnetBlock3D) and at the end of the call. The
// caching allocator never splits a block, so blocks kept past a change of
// activation size are dead weight: at 9 x 256 x 256 they were 2.3 GiB of the
// 6.0 GiB peak of a bfloat16 decode (now 3.3 GiB, diffusers' 3.4; the rest
// of the difference was oneDNN's whole-video copies of the largest convs'
// input and output, now made a time slab at a time: ops/cpu/onednn_conv.h).
//
// Device-agnostic: every step is an op (ops::conv3d, group_norm, mul_, add_,
// silu_, upsample_nearest, copy_rows) on the placement's device; only the
// stream's input and output cross to the host.
#include "models/autoencoder_kl_cogvideox.h"

#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "io/model_dir.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

// Every key diffusers 0.42.1's AutoencoderKLCogVideoX.__init__ takes, and
// sample_size, which diffusers 0.30's took (CogVideoX-2b's first vae/config.json
// carries it; today's diffusers ignores it, and so does ditgen: tiling only).
// Keys starting with '_' are metadata.
const std::set<std::string> kKnownKeys = {
    "in_channels",     "out_channels",   "down_block_types",      "up_block_types",
    "block_out_channels", "latent_channels", "layers_per_block",   "act_fn",
    "norm_eps",        "norm_num_groups", "temporal_compression_ratio", "sample_height",
    "sample_width",    "scaling_factor", "shift_factor",          "latents_mean",
    "latents_std",     "force_upcast",   "use_quant_conv",        "use_post_quant_conv",
    "invert_scale_latents", "sample_size"};

// Where each part of the decoder is stored, written once: the declarations
// and the load both follow these.
const std::string kConvIn = "decoder.conv_in.conv.";
const std::string kMidBlock = "decoder.mid_block.";
const std::string kNormOut = "decoder.norm_out.";
const std::string kConvOut = "decoder.conv_out.conv.";
constexpr std::array<int64_t, 3> k3x3x3 = {3, 3, 3};

std::string mid_resnet(int r) { return kMidBlock + "resnets." + std::to_string(r) + "."; }
std::string upsampler(const std::string& up_block) { return up_block + "upsamplers.0.conv."; }

// A list of `n` block type names, each `type`, or ModelError naming the key.
void check_block_types(const nlohmann::json& cfg, const char* key, const char* type, size_t n,
                       const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) {  // diffusers' default: four of them
    require(n == 4, path, std::string(key) + ": absent (diffusers' default: four blocks), but block_out_channels has " +
                              std::to_string(n) + " entries");
    return;
  }
  const auto& a = cfg[key];
  require(a.is_array(), path, std::string(key) + ": expected an array of block type names, got " + a.dump());
  for (size_t i = 0; i < a.size(); ++i)
    require(a[i].is_string() && a[i].get<std::string>() == type, path,
            std::string(key) + "[" + std::to_string(i) + "]: " + a[i].dump() + " (diffusers builds only " + type + ")");
  require(a.size() == n, path,
          std::string(key) + ": " + std::to_string(a.size()) + " blocks for " + std::to_string(n) +
              " block_out_channels entries");
}

}  // namespace

int64_t AutoencoderKLCogVideoXConfig::time_upsamplers() const {
  int64_t level = 0;
  while ((int64_t{1} << level) < temporal_compression_ratio) ++level;
  return level;
}

int64_t AutoencoderKLCogVideoXConfig::chunk_frames(int64_t n) const {
  for (int64_t i = 0; i < time_upsamplers(); ++i) n = n > 1 && n % 2 == 1 ? 1 + 2 * (n - 1) : (n > 1 ? 2 * n : n);
  return n;
}

std::vector<int64_t> AutoencoderKLCogVideoXConfig::latent_chunks(int64_t latent_frames) {
  // _decode: max(F // 2, 1) batches; the first takes 2 + F % 2 frames (all
  // of them when F = 1), the rest 2 each.
  if (latent_frames < 1) return {};
  if (latent_frames == 1) return {1};
  std::vector<int64_t> chunks = {2 + latent_frames % 2};
  for (int64_t i = 1; i < latent_frames / 2; ++i) chunks.push_back(2);
  return chunks;
}

AutoencoderKLCogVideoXConfig AutoencoderKLCogVideoXConfig::from_json(const nlohmann::json& cfg,
                                                                     const std::string& path) {
  using io::get_bool_or;
  using io::get_int_or;
  check_class_and_known_keys(cfg, path, "AutoencoderKLCogVideoX", kKnownKeys);

  AutoencoderKLCogVideoXConfig c;
  read_positive_ints(cfg, path,
                     {{"in_channels", &c.in_channels}, {"out_channels", &c.out_channels},
                      {"latent_channels", &c.latent_channels}, {"norm_num_groups", &c.norm_num_groups},
                      {"sample_height", &c.sample_height}, {"sample_width", &c.sample_width}});
  c.layers_per_block = get_int_or(cfg, "layers_per_block", c.layers_per_block, path);
  require(c.layers_per_block >= 0 && c.layers_per_block <= 64, path,
          "layers_per_block: expected an integer in [0, 64], got " + std::to_string(c.layers_per_block));
  c.force_upcast = get_bool_or(cfg, "force_upcast", c.force_upcast, path);
  c.use_quant_conv = get_bool_or(cfg, "use_quant_conv", c.use_quant_conv, path);
  c.invert_scale_latents = get_bool_or(cfg, "invert_scale_latents", c.invert_scale_latents, path);
  read_positive_int_list(cfg, path, "block_out_channels", 16, &c.block_out_channels);
  const size_t n = c.block_out_channels.size();
  for (size_t i = 0; i < n; ++i)
    require(c.block_out_channels[i] % c.norm_num_groups == 0, path,
            "norm_num_groups: " + std::to_string(c.norm_num_groups) + " does not divide block_out_channels[" +
                std::to_string(i) + "] = " + std::to_string(c.block_out_channels[i]));
  check_block_types(cfg, "down_block_types", "CogVideoXDownBlock3D", n, path);
  check_block_types(cfg, "up_block_types", "CogVideoXUpBlock3D", n, path);

  c.norm_eps = io::get_number_or(cfg, "norm_eps", c.norm_eps, path);
  require(std::isfinite(c.norm_eps) && c.norm_eps > 0, path, "norm_eps: expected a positive number");
  const double sf = io::get_number_or(cfg, "scaling_factor", c.scaling_factor, path);
  require(std::isfinite(sf) && sf > 0, path, "scaling_factor: expected a positive number, got " + std::to_string(sf));
  c.scaling_factor = static_cast<float>(sf);

  // diffusers takes int(log2(ratio)) up blocks for time; anything but a power
  // of two would make frame counts the config does not say.
  c.temporal_compression_ratio = get_int_or(cfg, "temporal_compression_ratio", c.temporal_compression_ratio, path);
  const int64_t r = c.temporal_compression_ratio;
  require(r >= 1 && (r & (r - 1)) == 0, path,
          "temporal_compression_ratio: expected a power of two, got " + std::to_string(r));
  require(c.time_upsamplers() <= static_cast<int64_t>(n) - 1, path,
          "temporal_compression_ratio: " + std::to_string(r) + ", but " + std::to_string(n) +
              " blocks have only " + std::to_string(n - 1) + " upsamplers to double time with");

  // What diffusers builds and this decoder does not.
  const std::string act = io::get_string_or(cfg, "act_fn", "silu", path);
  if (act != "silu" && act != "swish") not_supported(path + ": act_fn '" + act + "' (only silu / swish)");
  if (get_bool_or(cfg, "use_post_quant_conv", false, path))
    // diffusers builds it with out_channels channels and applies it to the
    // latents: only consistent when latent_channels == out_channels, and no
    // published CogVideoX VAE has one.
    not_supported(path + ": use_post_quant_conv true (no published CogVideoX VAE has a post_quant_conv)");
  // CogVideoXPipeline decodes 1 / scaling_factor * latents and reads none of
  // these; a checkpoint setting them would expect a normalisation ditgen
  // does not apply.
  for (const char* key : {"shift_factor", "latents_mean", "latents_std"})
    if (cfg.contains(key) && !cfg[key].is_null())
      not_supported(path + ": " + key + " " + cfg[key].dump() + " (only null: latents are 1 / scaling_factor * z)");
  // use_quant_conv (the encoder's quant_conv) and invert_scale_latents (how
  // CogVideoXImageToVideoPipeline scales an encoded image) concern encoding
  // only: accepted either way.
  return c;
}

nn::TensorDecls AutoencoderKLCogVideoX::decoder_tensors(const AutoencoderKLCogVideoXConfig& c) {
  const UpBlockChannels up = reversed_up_blocks(c.block_out_channels);
  const int64_t zc = c.latent_channels, c0 = up.out[0], c_last = up.out.back();
  nn::TensorDecls t = nn::CausalConv3d::tensors(kConvIn, c0, zc, k3x3x3);
  for (int r = 0; r < 2; ++r) nn::append(t, nn::CogVideoXResnetBlock3D::tensors(mid_resnet(r), c0, c0, zc));
  walk_up_blocks(
      up, c.layers_per_block + 1,
      [&](const UpResnet& r) { nn::append(t, nn::CogVideoXResnetBlock3D::tensors(r.prefix, r.cin, r.cout, zc)); },
      [&](size_t i, const std::string& ub) {
        if (i + 1 < up.out.size()) nn::append(t, nn::Conv3d::tensors_2d(upsampler(ub), up.out[i], up.out[i], 3));
      });
  nn::append(t, nn::CogVideoXSpatialNorm::tensors(kNormOut, c_last, zc));
  nn::append(t, nn::CausalConv3d::tensors(kConvOut, c.out_channels, c_last, k3x3x3));
  return t;
}

void AutoencoderKLCogVideoX::check(const io::WeightStore& w, const AutoencoderKLCogVideoXConfig& c) {
  // A decoder tensor the config does not account for means config and
  // weights disagree (another layers_per_block or block_out_channels, or a
  // post_quant_conv the config says is absent).
  check_decoder_tensors(w, decoder_tensors(c), "block_out_channels, layers_per_block, use_post_quant_conv");
}

AutoencoderKLCogVideoX AutoencoderKLCogVideoX::load(const io::WeightStore& w, const AutoencoderKLCogVideoXConfig& c,
                                                    const Placement& place) {
  check(w, c);  // every name and shape, before anything is loaded
  const UpBlockChannels up = reversed_up_blocks(c.block_out_channels);
  const int64_t zc = c.latent_channels, c0 = up.out[0], c_last = up.out.back(), groups = c.norm_num_groups;
  AutoencoderKLCogVideoX m;
  m.place_ = place;
  m.cfg_ = c;
  m.conv_in_ = nn::CausalConv3d::load(w, kConvIn, c0, zc, k3x3x3, place);
  for (int r = 0; r < 2; ++r)
    m.mid_resnets_.push_back(nn::CogVideoXResnetBlock3D::load(w, mid_resnet(r), c0, c0, zc, groups, place));
  m.up_blocks_ = load_up_blocks<CogVideoXUpBlock>(
      up, c.layers_per_block + 1,
      [&](const UpResnet& r) {
        return nn::CogVideoXResnetBlock3D::load(w, r.prefix, r.cin, r.cout, zc, groups, place);
      },
      [&](size_t i, const std::string& ub, CogVideoXUpBlock& blk) {
        if (i + 1 == up.out.size()) return;  // the last block: no upsampler
        blk.upsample = true;
        blk.compress_time = c.compress_time(i);
        blk.up = nn::Conv3d::load_2d(w, upsampler(ub), up.out[i], up.out[i], 3, place);
      });
  m.norm_out_ = nn::CogVideoXSpatialNorm::load(w, kNormOut, c_last, zc, groups, place);
  m.conv_out_ = nn::CausalConv3d::load(w, kConvOut, c.out_channels, c_last, k3x3x3, place);
  m.slots_ = decoder_causal_slots<nn::CogVideoXResnetBlock3D>(
      m.conv_in_, {&m.mid_resnets_[0], &m.mid_resnets_[1]}, m.up_blocks_, m.conv_out_,
      [](const CogVideoXUpBlock&) -> const nn::CausalConv3d* {
        return nullptr;  // the upsamplers' convs are not causal
      });
  return m;
}

Tensor AutoencoderKLCogVideoX::upsample(Tensor x, const CogVideoXUpBlock& b) const {
  const int64_t t = x.dim(2);
  std::vector<int64_t> source;  // the input frame of each output frame
  if (!b.compress_time || t == 1) {
    for (int64_t f = 0; f < t; ++f) source.push_back(f);  // 2-D only
  } else if (t % 2 == 1) {
    source.push_back(0);  // the first frame stays single, the rest double
    for (int64_t f = 1; f < t; ++f) source.insert(source.end(), {f, f});
  } else {
    for (int64_t f = 0; f < t; ++f) source.insert(source.end(), {f, f});
  }
  Tensor up;
  {
    profile::ScopedTimer timer("vae.upsample");
    up = nn::resize_frames_nearest(x, source, 2, place_);
  }
  x = Tensor();
  profile::ScopedTimer timer("vae.conv2d");
  return b.up(up, {0, 1, 1});  // the 3x3 conv on every frame
}

Tensor AutoencoderKLCogVideoX::decode_chunk(const Tensor& z, Cache& cache) const {
  if (begin_causal_call(cache, z, cfg_.latent_channels, 0, kNames))
    start_causal_cache(cache, slots_, nn::CausalPad::kFirstFrame, place_);
  Tensor x = conv_in_(z, cache, place_);
  for (const nn::CogVideoXResnetBlock3D& r : mid_resnets_) x = r(std::move(x), z, cache, place_);
  for (const CogVideoXUpBlock& blk : up_blocks_) {
    for (const nn::CogVideoXResnetBlock3D& r : blk.resnets) x = r(std::move(x), z, cache, place_);
    if (!blk.upsample) continue;  // the last block: norm_out and conv_out work at its size
    // The upsampler and the next block work at 4x the pixels: this block's
    // staging buffer and the host blocks cached for its sizes could hold
    // none of theirs, so they go back before the upsampler's (its 4x input
    // and output are the level's largest tensors) and again after it.
    cache.staging = Tensor();
    device_memory::release_cached_host();
    x = upsample(std::move(x), blk);
    device_memory::release_cached_host();
  }
  x = norm_out_(x, z, place_);
  x = conv_out_(std::move(x), cache, place_);
  // The last level's blocks go too: the next chunk (or stage) starts at the
  // latent grid, where none of them would be reused before the first level
  // change gives them back anyway.
  cache.staging = Tensor();
  device_memory::release_cached_host();
  end_causal_call(cache, kNames);
  return x;
}

ChunkedDecode AutoencoderKLCogVideoX::chunked(int64_t latent_frames, const Cache&, bool stream) const {
  ChunkedDecode d = {{}, 0, cfg_.out_channels, cfg_.spatial_factor(), stream};
  d.chunks = stream ? std::vector<int64_t>{latent_frames} : AutoencoderKLCogVideoXConfig::latent_chunks(latent_frames);
  for (const int64_t n : d.chunks) d.frames += cfg_.chunk_frames(n);
  return d;
}

std::unique_ptr<VaeSpec> make_autoencoder_kl_cogvideox_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<AutoencoderKLCogVideoXSpec>(cfg, path);
}

}  // namespace ditgen::models
