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
// 32 MB each).
//
// The attention works on the NCHW map without transposes: the fused q/k/v
// projection is one GEMM with a transposed A (tokens = columns of the normed
// [C, HW] map) giving token rows [HW, 3C], ops::attention reads q/k/v out of
// those rows, and to_out is a GEMM with a transposed B that writes [C, HW]
// straight onto the residual.
#include "models/autoencoder_kl.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <utility>

#include "io/model_dir.h"
#include "models/vae_decoder_parts.h"
#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr float kNormEps = 1e-6f;  // resnet_eps of every decoder GroupNorm (and the attention's)

// The first of `names` present in the store (new name first, then legacy);
// ModelError listing all of them when none is.
std::string resolve(const io::WeightStore& w, const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (w.contains(n)) return n;
  throw ModelError(w.dir() + ": missing tensor '" + names[0] + "'" +
                   (names.size() > 1 ? " (or legacy " + join({names.begin() + 1, names.end()}) + ")" : ""));
}

// A projection stored as a linear [C, C] or a 1x1 conv [C, C, 1, 1].
void expect_projection(const io::WeightStore& w, const std::string& name, int64_t c) {
  const Shape& s = w.info(name).shape;
  if (s == Shape{c, c} || s == Shape{c, c, 1, 1}) {
    w.expect(name, s);  // dtype / loadability checks
    return;
  }
  throw ModelError(w.file_of(name) + ": tensor '" + name + "' has shape " + shape_str(s) + ", expected " +
                   shape_str({c, c}) + " or " + shape_str({c, c, 1, 1}) + " (from config.json)");
}

// Names of one resnet's tensors under `prefix` ("decoder.mid_block.resnets.0.").
std::vector<std::pair<std::string, Shape>> resnet_tensors(const std::string& p, int64_t cin, int64_t cout) {
  std::vector<std::pair<std::string, Shape>> t = {
      {p + "norm1.weight", {cin}},   {p + "norm1.bias", {cin}},
      {p + "conv1.weight", {cout, cin, 3, 3}}, {p + "conv1.bias", {cout}},
      {p + "norm2.weight", {cout}},  {p + "norm2.bias", {cout}},
      {p + "conv2.weight", {cout, cout, 3, 3}}, {p + "conv2.bias", {cout}}};
  if (cin != cout) {
    t.push_back({p + "conv_shortcut.weight", {cout, cin, 1, 1}});
    t.push_back({p + "conv_shortcut.bias", {cout}});
  }
  return t;
}

VaeResnet load_resnet(const io::WeightStore& store, const std::string& p, int64_t cin, int64_t cout,
                      const Placement& place) {
  auto w = [&](const std::string& name) { return place.put(store.load(name)); };
  auto conv = [&](const std::string& name) { return place.conv(store.load(name)); };
  VaeResnet r;
  r.norm1_w = w(p + "norm1.weight");
  r.norm1_b = w(p + "norm1.bias");
  r.conv1_w = conv(p + "conv1.weight");
  r.conv1_b = w(p + "conv1.bias");
  r.norm2_w = w(p + "norm2.weight");
  r.norm2_b = w(p + "norm2.bias");
  r.conv2_w = conv(p + "conv2.weight");
  r.conv2_b = w(p + "conv2.bias");
  if (cin != cout) {
    r.shortcut_w = conv(p + "conv_shortcut.weight");
    r.shortcut_b = w(p + "conv_shortcut.bias");
  }
  return r;
}

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

AutoencoderKL AutoencoderKL::load(const io::WeightStore& w, const AutoencoderKLConfig& c, const Placement& place) {
  if (c.block_out_channels.empty()) throw ModelError(w.dir() + ": VAE config has no block_out_channels");
  const int64_t L = c.latent_channels, n = static_cast<int64_t>(c.block_out_channels.size());
  const int64_t c_last = c.block_out_channels.back(), c0 = c.block_out_channels.front();
  const std::string mid = "decoder.mid_block.", att = mid + "attentions.0.";

  // Validate every name and shape before loading anything.
  std::vector<std::pair<std::string, Shape>> expected = {
      {"decoder.conv_in.weight", {c_last, L, 3, 3}},  {"decoder.conv_in.bias", {c_last}},
      {"decoder.conv_norm_out.weight", {c0}},         {"decoder.conv_norm_out.bias", {c0}},
      {"decoder.conv_out.weight", {c.out_channels, c0, 3, 3}}, {"decoder.conv_out.bias", {c.out_channels}}};
  if (c.use_post_quant_conv) {
    expected.push_back({"post_quant_conv.weight", {L, L, 1, 1}});
    expected.push_back({"post_quant_conv.bias", {L}});
  }
  for (int r = 0; r < 2; ++r)
    for (auto& e : resnet_tensors(mid + "resnets." + std::to_string(r) + ".", c_last, c_last))
      expected.push_back(std::move(e));
  const UpBlockChannels up = reversed_up_blocks(c.block_out_channels);
  walk_up_blocks(
      up, c.layers_per_block + 1,
      [&](const UpResnet& r) {
        for (auto& e : resnet_tensors(r.prefix, r.cin, r.cout)) expected.push_back(std::move(e));
      },
      [&](size_t i, const std::string& ub) {
        const int64_t ch = up.out[i];
        if (static_cast<int64_t>(i) + 1 < n) add_conv_tensors(expected, ub + "upsamplers.0.conv.", {ch, ch, 3, 3});
      });
  for (auto& [name, shape] : expected) w.expect(name, shape);

  // Tensors the config does not account for mean config and weights disagree.
  const std::string extra[] = {
      "decoder.up_blocks." + std::to_string(n) + ".resnets.0.conv1.weight",
      "decoder.up_blocks.0.resnets." + std::to_string(c.layers_per_block + 1) + ".conv1.weight",
      "decoder.up_blocks." + std::to_string(n - 1) + ".upsamplers.0.conv.weight"};
  for (const auto& e : extra)
    if (w.contains(e))
      throw ModelError(w.dir() + ": holds '" + e + "', which config.json (block_out_channels, layers_per_block) "
                       "does not account for");

  // The mid-block attention: current names, or the pre-0.14 ones.
  struct Proj {
    std::string w, b;
  };
  Proj proj[4];  // q, k, v, out
  if (c.mid_block_add_attention) {
    w.expect(att + "group_norm.weight", {c_last});
    w.expect(att + "group_norm.bias", {c_last});
    const char* now[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    const char* legacy[4] = {"query", "key", "value", "proj_attn"};
    for (int i = 0; i < 4; ++i) {
      proj[i].w = resolve(w, {att + now[i] + ".weight", att + legacy[i] + ".weight"});
      proj[i].b = resolve(w, {att + now[i] + ".bias", att + legacy[i] + ".bias"});
      expect_projection(w, proj[i].w, c_last);
      w.expect(proj[i].b, {c_last});
    }
  } else if (w.contains(att + "group_norm.weight")) {
    throw ModelError(w.dir() + ": holds a mid-block attention but config.json has mid_block_add_attention false");
  }

  AutoencoderKL m;
  m.place_ = place;
  m.cfg_ = c;
  if (c.use_post_quant_conv) {
    m.post_quant_w = place.conv(w.load("post_quant_conv.weight"));
    m.post_quant_b = place.put(w.load("post_quant_conv.bias"));
  }
  m.conv_in_w = place.conv(w.load("decoder.conv_in.weight"));
  m.conv_in_b = place.put(w.load("decoder.conv_in.bias"));
  m.mid_resnet0 = load_resnet(w, mid + "resnets.0.", c_last, c_last, place);
  m.mid_resnet1 = load_resnet(w, mid + "resnets.1.", c_last, c_last, place);
  if (c.mid_block_add_attention) {
    VaeAttention a;
    a.norm_w = place.put(w.load(att + "group_norm.weight"));
    a.norm_b = place.put(w.load(att + "group_norm.bias"));
    Tensor qkv_w = Tensor::empty({3 * c_last, c_last}), qkv_b = Tensor::empty({3 * c_last});  // fused on the host
    for (int i = 0; i < 3; ++i) {
      Tensor pw = w.load(proj[i].w).to(DType::kF32), pb = w.load(proj[i].b).to(DType::kF32);  // as stored -> float32
      std::copy(pw.data(), pw.data() + c_last * c_last, qkv_w.data() + i * c_last * c_last);
      std::copy(pb.data(), pb.data() + c_last, qkv_b.data() + i * c_last);
    }
    a.qkv_w = place.matrix(qkv_w);  // b of a GEMM: its dtype the arithmetic
    a.qkv_b = place.put(qkv_b);
    a.out_w = place.put(w.load(proj[3].w).reshape({c_last, c_last}));
    a.out_b = place.put(w.load(proj[3].b));
    m.mid_attn = std::move(a);
  }
  m.up_blocks = load_up_blocks<VaeUpBlock>(
      up, c.layers_per_block + 1, [&](const UpResnet& r) { return load_resnet(w, r.prefix, r.cin, r.cout, place); },
      [&](size_t i, const std::string& ub, VaeUpBlock& blk) {
        if (static_cast<int64_t>(i) + 1 == n) return;  // the last block: no upsampler
        blk.up_w = place.conv(w.load(ub + "upsamplers.0.conv.weight"));
        blk.up_b = place.put(w.load(ub + "upsamplers.0.conv.bias"));
      });
  m.norm_out_w = place.put(w.load("decoder.conv_norm_out.weight"));
  m.norm_out_b = place.put(w.load("decoder.conv_norm_out.bias"));
  m.conv_out_w = place.conv(w.load("decoder.conv_out.weight"));
  m.conv_out_b = place.put(w.load("decoder.conv_out.bias"));
  return m;
}

Tensor AutoencoderKL::resnet(const Tensor& x, const VaeResnet& r) const {
  const int64_t g = cfg_.norm_num_groups;
  Tensor h;
  {
    profile::ScopedTimer t("vae.group_norm");
    h = ops::group_norm(x, g, r.norm1_w, r.norm1_b, kNormEps, true);
  }
  {
    profile::ScopedTimer t("vae.conv3x3");
    h = ops::conv2d(h, r.conv1_w, &r.conv1_b, 1, 1);
  }
  {
    profile::ScopedTimer t("vae.group_norm");
    h = ops::group_norm(h, g, r.norm2_w, r.norm2_b, kNormEps, true);
  }
  {
    profile::ScopedTimer t("vae.conv3x3");
    h = ops::conv2d(h, r.conv2_w, &r.conv2_b, 1, 1);
  }
  profile::ScopedTimer t("vae.residual");
  if (r.shortcut_w.defined()) {
    ops::add_(h, ops::conv2d(x, r.shortcut_w, &r.shortcut_b, 1, 0));
  } else {
    ops::add_(h, x);
  }
  return h;  // output_scale_factor is 1 in the decoder
}

Tensor AutoencoderKL::attention(const Tensor& x, const VaeAttention& a) const {
  profile::ScopedTimer t("vae.attention");
  const int64_t c = x.dim(1), n = x.dim(2) * x.dim(3);
  Tensor normed = ops::group_norm(x, cfg_.norm_num_groups, a.norm_w, a.norm_b, kNormEps, false).reshape({c, n});

  // qkv[t, :] = normed[:, t]^T · qkv_w^T + qkv_b.
  Tensor qkv = place_.empty({n, 3 * c});  // (HW, 3C) token rows: q | k | v
  ops::gemm(true, true, 1.0f, normed, a.qkv_w, 0.0f, qkv);
  ops::add_broadcast_(qkv, a.qkv_b);
  normed = Tensor();

  Tensor attn = place_.empty({n, c});  // (HW, C) attention output, token rows
  // One sample, one head of size c, q/k/v read from the fused rows.
  ops::AttentionArgs args = ops::attention_args(ops::rows_of(qkv, 0, 3 * c, n), ops::rows_of(qkv, c, 3 * c, n),
                                                ops::rows_of(qkv, 2 * c, 3 * c, n), ops::rows_of(attn, 0, c, n), 1,
                                                1, c);
  args.follow_attention_mode = false;  // --attention is the transformer's; head size c here (512 in SD VAEs)
  args.compute = place_.dtype;
  ops::attention(args);
  qkv = Tensor();

  // out[C, HW] = x + to_out.bias + out_w · attn^T (residual_connection,
  // rescale 1); the bias enters as a rank-1 product bias[C, 1] · ones[1, HW]
  // so every step is an op on the model's device.
  Tensor out = x.clone().reshape({c, n});
  ops::gemm(false, false, 1.0f, a.out_b.reshape({c, 1}), ones_row(n), 1.0f, out);
  ops::gemm(false, true, 1.0f, a.out_w, attn, 1.0f, out);
  return out.reshape(x.shape());
}

Tensor AutoencoderKL::ones_row(int64_t n) const { return place_.put(Tensor::full({1, n}, 1.0f)); }

Tensor AutoencoderKL::decode_one(const Tensor& z) const {
  Tensor h;
  {
    profile::ScopedTimer t("vae.conv_in");
    h = cfg_.use_post_quant_conv ? ops::conv2d(z, post_quant_w, &post_quant_b, 1, 0) : z;
    h = ops::conv2d(h, conv_in_w, &conv_in_b, 1, 1);
  }
  h = resnet(h, mid_resnet0);
  if (mid_attn) h = attention(h, *mid_attn);
  h = resnet(h, mid_resnet1);
  for (const VaeUpBlock& blk : up_blocks) {
    for (const VaeResnet& r : blk.resnets) h = resnet(h, r);
    if (blk.up_w.defined()) {
      {
        profile::ScopedTimer t("vae.upsample");
        h = ops::upsample_nearest(h, 2);
      }
      profile::ScopedTimer t("vae.conv3x3");
      h = ops::conv2d(h, blk.up_w, &blk.up_b, 1, 1);
    }
    // The next block works at 4x the pixels: the host blocks cached for
    // this one's tensors could not hold its, so they go back now rather
    // than stay resident through the rest of the decode.
    device_memory::release_cached_host();
  }
  {
    profile::ScopedTimer t("vae.group_norm");
    h = ops::group_norm(h, cfg_.norm_num_groups, norm_out_w, norm_out_b, kNormEps, true);
  }
  profile::ScopedTimer t("vae.conv_out");
  return ops::conv2d(h, conv_out_w, &conv_out_b, 1, 1);
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
