// AutoencoderKL decoder forward, following diffusers' Decoder / UNetMidBlock2D
// / UpDecoderBlock2D / ResnetBlock2D / Upsample2D / Attention (the
// _from_deprecated_attn_block variant: GroupNorm, one head of size C,
// residual connection, rescale_output_factor 1).
//
// The work is 3x3 convolutions (ops::conv2d: oneDNN on the CPU, in the
// placement's dtype: float32, or bfloat16 under model.vae_dtype); GroupNorm is
// always fused with the SiLU that follows it. Intermediates are released as
// soon as they are consumed, and images are decoded one at a time, so the
// peak is a few feature maps of one image (at 256x256 with 128 channels,
// 32 MB each). The attention is nn::PixelAttention (no transposes).
//
// Where each part is stored is written once, in the walk below
// (decoder_parts), which both the declarations and the load follow.
#include "models/autoencoder_kl.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "io/model_dir.h"
#include "models/vae_decoder_parts.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr float kNormEps = 1e-6f;  // resnet_eps of every decoder GroupNorm (and the attention's)

const std::string kPostQuantConv = "post_quant_conv.";
const std::string kConvIn = "decoder.conv_in.";
const std::string kMidBlock = "decoder.mid_block.";
const std::string kMidAttention = kMidBlock + "attentions.0.";
const std::string kMidAttentionNorm = kMidAttention + "group_norm.";
const std::string kNormOut = "decoder.conv_norm_out.";
const std::string kConvOut = "decoder.conv_out.";

std::string mid_resnet(int r) { return kMidBlock + "resnets." + std::to_string(r) + "."; }
std::string upsampler(const std::string& up_block) { return up_block + "upsamplers.0.conv."; }

nn::ResnetDims resnet_dims(const AutoencoderKLConfig& c, int64_t cin, int64_t cout) {
  return {cin, cout, c.norm_num_groups, kNormEps};
}

// The decoder's channels: the latent's, the last block's (where decoding
// starts) and the first's (where it ends).
struct DecoderChannels {
  int64_t latent, last, first;
  explicit DecoderChannels(const AutoencoderKLConfig& c)
      : latent(c.latent_channels), last(c.block_out_channels.back()), first(c.block_out_channels.front()) {}
};

}  // namespace

AutoencoderKLConfig AutoencoderKLConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int_or;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == "AutoencoderKL", path, "_class_name: not an AutoencoderKL (got '" + cls + "')");
  AutoencoderKLConfig c;
  c.in_channels = get_int_or(cfg, "in_channels", c.in_channels, path);
  read_positive_ints(cfg, path,
                     {{"out_channels", &c.out_channels}, {"latent_channels", &c.latent_channels},
                      {"norm_num_groups", &c.norm_num_groups}});
  c.layers_per_block = get_int_or(cfg, "layers_per_block", c.layers_per_block, path);
  c.scaling_factor = static_cast<float>(io::get_number_or(cfg, "scaling_factor", c.scaling_factor, path));
  // diffusers' DiT / PixArt / Latte pipelines only divide by scaling_factor
  // and ignore shift_factor (an SD3/Flux VAE key): a VAE that needs it would
  // decode wrongly here, so it is refused rather than silently dropped.
  if (cfg.contains("shift_factor") && !cfg["shift_factor"].is_null())
    throw ModelError(path + ": shift_factor: not supported yet (got " + cfg["shift_factor"].dump() +
                     "; only null or absent)");
  c.use_post_quant_conv = io::get_bool_or(cfg, "use_post_quant_conv", true, path);
  c.mid_block_add_attention = io::get_bool_or(cfg, "mid_block_add_attention", true, path);
  c.force_upcast = io::get_bool_or(cfg, "force_upcast", true, path);
  // diffusers: sample_size[0] when a list (tiling's tile size only).
  if (cfg.contains("sample_size") && !cfg["sample_size"].is_null()) {
    const nlohmann::json& size = cfg["sample_size"];
    const nlohmann::json& first = size.is_array() && !size.empty() ? size[0] : size;
    require(first.is_number_integer() && first.get<int64_t>() > 0, path,
            "sample_size: expected a positive integer (or a list of them), got " + size.dump());
    c.sample_size = first.get<int64_t>();
  }

  if (cfg.contains("block_out_channels") && !cfg["block_out_channels"].is_null()) {
    const auto& b = cfg["block_out_channels"];
    require(b.is_array() && !b.empty(), path, "block_out_channels: expected a non-empty array of integers, got " +
                                                  b.dump());
    c.block_out_channels.clear();
    for (size_t i = 0; i < b.size(); ++i) {
      require(b[i].is_number_integer(), path,
              "block_out_channels[" + std::to_string(i) + "]: expected an integer, got " + b[i].dump());
      c.block_out_channels.push_back(b[i].get<int64_t>());
    }
  }
  require(c.layers_per_block >= 0, path,
          "layers_per_block: expected a non-negative integer, got " + std::to_string(c.layers_per_block));
  require(c.block_out_channels.size() <= 16, path, "block_out_channels: more than 16 blocks");
  for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
    const int64_t ch = c.block_out_channels[i];
    require(ch > 0 && ch % c.norm_num_groups == 0, path,
            "block_out_channels[" + std::to_string(i) + "] = " + std::to_string(ch) +
                " is not a positive multiple of norm_num_groups = " + std::to_string(c.norm_num_groups));
  }
  require(std::isfinite(c.scaling_factor) && c.scaling_factor != 0.0f, path,
          "scaling_factor: expected a finite non-zero number");

  const std::string act = io::get_string_or(cfg, "act_fn", "silu", path);
  if (act != "silu" && act != "swish") throw ModelError(path + ": act_fn: not supported yet: '" + act + "'");
  if (cfg.contains("up_block_types") && !cfg["up_block_types"].is_null()) {
    const auto& u = cfg["up_block_types"];
    require(u.is_array() && u.size() == c.block_out_channels.size(), path,
            "up_block_types: expected " + std::to_string(c.block_out_channels.size()) +
                " entries (one per block_out_channels), got " + u.dump());
    for (const auto& t : u)
      if (!t.is_string() || t.get<std::string>() != "UpDecoderBlock2D")
        throw ModelError(path + ": up_block_types: not supported yet: " + t.dump() + " (only UpDecoderBlock2D)");
  }
  return c;
}

nn::TensorDecls AutoencoderKL::decoder_tensors(const AutoencoderKLConfig& c) {
  const DecoderChannels ch(c);
  nn::TensorDecls t;
  if (c.use_post_quant_conv) nn::append(t, nn::Conv2d::tensors(kPostQuantConv, ch.latent, ch.latent, 1));
  nn::append(t, nn::Conv2d::tensors(kConvIn, ch.last, ch.latent, 3));
  nn::append(t, nn::ResnetBlock2D::tensors(mid_resnet(0), resnet_dims(c, ch.last, ch.last)));
  if (c.mid_block_add_attention) {
    nn::append(t, nn::GroupNorm::tensors(kMidAttentionNorm, ch.last));
    nn::append(t, nn::PixelAttention::separate_tensors(kMidAttention, ch.last));
  }
  nn::append(t, nn::ResnetBlock2D::tensors(mid_resnet(1), resnet_dims(c, ch.last, ch.last)));
  const UpBlockChannels up = reversed_up_blocks(c.block_out_channels);
  walk_up_blocks(
      up, c.layers_per_block + 1,
      [&](const UpResnet& r) { nn::append(t, nn::ResnetBlock2D::tensors(r.prefix, resnet_dims(c, r.cin, r.cout))); },
      [&](size_t i, const std::string& ub) {
        if (i + 1 < up.out.size()) nn::append(t, nn::UpsampleConv2d::tensors(upsampler(ub), up.out[i], up.out[i]));
      });
  nn::append(t, nn::GroupNorm::tensors(kNormOut, ch.first));
  nn::append(t, nn::Conv2d::tensors(kConvOut, c.out_channels, ch.first, 3));
  return t;
}

void AutoencoderKL::check(const io::WeightStore& w, const AutoencoderKLConfig& c) {
  if (c.block_out_channels.empty()) throw ModelError(w.dir() + ": VAE config has no block_out_channels");
  // A decoder tensor the config does not account for means config and
  // weights disagree.
  check_decoder_tensors(w, decoder_tensors(c),
                        "block_out_channels, layers_per_block, mid_block_add_attention, use_post_quant_conv");
}

AutoencoderKL AutoencoderKL::load(const io::WeightStore& w, const AutoencoderKLConfig& c, const Placement& place) {
  check(w, c);  // every name and shape, before anything is loaded
  const DecoderChannels ch(c);
  AutoencoderKL m;
  m.place_ = place;
  m.cfg_ = c;
  if (c.use_post_quant_conv) m.post_quant_ = nn::Conv2d::load(w, kPostQuantConv, ch.latent, ch.latent, 1, place);
  m.conv_in_ = nn::Conv2d::load(w, kConvIn, ch.last, ch.latent, 3, place);
  m.mid_resnet0_ = nn::ResnetBlock2D::load(w, mid_resnet(0), resnet_dims(c, ch.last, ch.last), place);
  if (c.mid_block_add_attention) {
    m.mid_attn_norm_ = nn::GroupNorm::load(w, kMidAttentionNorm, ch.last, c.norm_num_groups, kNormEps, place);
    m.mid_attn_ = nn::PixelAttention::load_separate(w, kMidAttention, ch.last, place);
  }
  m.mid_resnet1_ = nn::ResnetBlock2D::load(w, mid_resnet(1), resnet_dims(c, ch.last, ch.last), place);
  const UpBlockChannels up = reversed_up_blocks(c.block_out_channels);
  m.up_blocks_ = load_up_blocks<VaeUpBlock>(
      up, c.layers_per_block + 1,
      [&](const UpResnet& r) { return nn::ResnetBlock2D::load(w, r.prefix, resnet_dims(c, r.cin, r.cout), place); },
      [&](size_t i, const std::string& ub, VaeUpBlock& blk) {
        if (i + 1 < up.out.size()) blk.upsampler = nn::UpsampleConv2d::load(w, upsampler(ub), up.out[i], up.out[i], place);
      });
  m.norm_out_ = nn::GroupNorm::load(w, kNormOut, ch.first, c.norm_num_groups, kNormEps, place);
  m.conv_out_ = nn::Conv2d::load(w, kConvOut, c.out_channels, ch.first, 3, place);
  return m;
}

Tensor AutoencoderKL::attention(const Tensor& x) const {
  profile::ScopedTimer t("vae.attention");
  Tensor normed = mid_attn_norm_(x);
  Tensor out = x.clone();  // (1, C, H, W): the residual, attention added in place
  mid_attn_.add_to(std::move(normed), out);
  return out;
}

Tensor AutoencoderKL::decode_one(const Tensor& z) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.conv_in");
    h = cfg_.use_post_quant_conv ? post_quant_(z) : z;
    h = conv_in_(h);
  }
  h = mid_resnet0_(h);
  if (mid_attn_norm_.weight.defined()) h = attention(h);
  h = mid_resnet1_(h);
  for (const VaeUpBlock& blk : up_blocks_) {
    for (const nn::ResnetBlock2D& r : blk.resnets) h = r(h);
    if (blk.upsampler.defined()) {
      profile::ScopedTimer t("vae.upsample");  // nearest x2 and the 3x3 conv, as one 2x2 conv of four phases
      h = blk.upsampler(h);
    }
    // The next block works at 4x the pixels: the host blocks cached for
    // this one's tensors could not hold its, so they go back now rather
    // than stay resident through the rest of the decode.
    device_memory::release_cached_host();
  }
  {
    profile::ScopedTimer t("vae.group_norm");
    h = norm_out_(h, true);
  }
  profile::ScopedTimer t("vae.conv_out");
  return conv_out_(h);
}

Tensor AutoencoderKL::decode(const Tensor& latents) const {
  if (latents.ndim() != 4 || latents.dim(1) != cfg_.latent_channels || latents.dim(2) < 1 || latents.dim(3) < 1)
    throw RuntimeFailure("VAE decode: latents " + shape_str(latents.shape()) + " do not match [B, " +
                         std::to_string(cfg_.latent_channels) + ", h, w]");
  const int64_t b = latents.dim(0), f = cfg_.scale_factor();
  Tensor out = Tensor::empty({b, cfg_.out_channels, latents.dim(2) * f, latents.dim(3) * f});  // (B, out, H, W)
  for (int64_t i = 0; i < b; ++i) out.slice0(i, i + 1).copy_from(decode_one(place_.put(latents.slice0(i, i + 1))));
  return out;
}

namespace {

// A video's frames have no time dependence here: each chunk of latent
// frames is a batch of images.
class AutoencoderKLStream final : public VaeDecoder::Stream {
 public:
  explicit AutoencoderKLStream(const AutoencoderKL& vae) : vae_(vae) {}
  Tensor next(const Tensor& latents) override {  // (C, n, h, w) -> (n, C, h, w) -> (n, out, H, W)
    const int64_t channels = latents.dim(0), n = latents.dim(1), hw = latents.dim(2) * latents.dim(3);
    Tensor z = Tensor::empty({n, channels, latents.dim(2), latents.dim(3)});
    for (int64_t f = 0; f < n; ++f)
      for (int64_t c = 0; c < channels; ++c)
        std::memcpy(z.data() + (f * channels + c) * hw, latents.data() + (c * n + f) * hw,
                    static_cast<size_t>(hw) * sizeof(float));
    return vae_.decode(z);
  }

 private:
  const AutoencoderKL& vae_;
};

}  // namespace

std::unique_ptr<VaeDecoder> AutoencoderKLSpec::load(const io::WeightStore& weights, const Placement& place) const {
  return std::make_unique<VaeDecoderOf<AutoencoderKL, AutoencoderKLStream>>(AutoencoderKL::load(weights, cfg_, place));
}

std::unique_ptr<VaeSpec> make_autoencoder_kl_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<AutoencoderKLSpec>(cfg, path);
}

}  // namespace ditgen::models
