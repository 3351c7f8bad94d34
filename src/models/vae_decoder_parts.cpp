// The parts the VAE decoders share (models/vae_decoder_parts.h).
//
// The causal conv. A kernel-3-in-time conv over a video decoded a chunk at
// a time sees its whole input stream causally padded by two frames: here
// each causal conv has a two-frame slot, every call builds [slot | chunk]
// along time in the level's staging buffer (ops::copy_rows), keeps the last
// two frames of that input in the slot, and runs ops::conv3d with time
// padding 0. The families differ only in the padding before a video's first
// chunk (CausalPad): Wan's slots start as zeros, CogVideoX's first chunk
// repeats its first frame.
#include "models/vae_decoder_parts.h"

#include <cstring>
#include <set>
#include <stdexcept>

#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

UpBlockChannels reversed_up_blocks(const std::vector<int64_t>& block_out_channels) {
  UpBlockChannels c;
  c.out.assign(block_out_channels.rbegin(), block_out_channels.rend());
  for (size_t i = 0; i < c.out.size(); ++i) c.in.push_back(c.out[i == 0 ? 0 : i - 1]);
  return c;
}

void walk_up_blocks(const UpBlockChannels& channels, int64_t per_block,
                    const std::function<void(const UpResnet&)>& resnet,
                    const std::function<void(size_t, const std::string&)>& block_end) {
  for (size_t i = 0; i < channels.out.size(); ++i) {
    const std::string ub = "decoder.up_blocks." + std::to_string(i) + ".";
    for (int64_t j = 0; j < per_block; ++j) {
      const int64_t cin = j == 0 ? channels.in[i] : channels.out[i];
      resnet({i, ub + "resnets." + std::to_string(j) + ".", cin, channels.out[i]});
    }
    block_end(i, ub);
  }
}

void add_conv_tensors(TensorList& t, const std::string& prefix, Shape weight) {
  const int64_t cout = weight[0];
  t.push_back({prefix + "weight", std::move(weight)});
  t.push_back({prefix + "bias", {cout}});
}

void expect_decoder_tensors(const io::WeightStore& w, const TensorList& expected, const std::string& keys) {
  std::set<std::string> names;
  for (const auto& [name, shape] : expected) {
    w.expect(name, shape);
    names.insert(name);
  }
  for (const std::string& name : w.names())
    if ((name.rfind("decoder.", 0) == 0 || name.rfind("post_quant_conv.", 0) == 0) && !names.count(name))
      throw ModelError(w.file_of(name) + ": holds '" + name + "', which config.json (" + keys +
                       ") does not account for");
}

Tensor Conv3d::operator()(const Tensor& x, std::array<int64_t, 3> pad) const {
  return ops::conv3d(x, w, &b, {1, 1, 1}, pad);
}

Tensor load_placed(const io::WeightStore& w, const std::string& name, const Placement& place, bool conv,
                   const Shape& shape) {
  Tensor source = w.load(name);
  if (!shape.empty()) source = source.reshape(shape);
  return release_source(w, name, source, conv ? place.conv(source) : place.put(source));
}

Conv3d load_conv3d(const io::WeightStore& w, const std::string& prefix, const Placement& place, const Shape& shape) {
  return {load_placed(w, prefix + "weight", place, true, shape), load_placed(w, prefix + "bias", place, false)};
}

void add_residual(Tensor& h, const Tensor& x, const Conv3d& shortcut) {
  profile::ScopedTimer t("vae.residual");
  if (shortcut.defined())
    ops::add_(h, shortcut(x));
  else
    ops::add_(h, x);
}

bool begin_causal_call(CausalCache& cache, const Tensor& z, int64_t channels, int64_t frames,
                       const CausalVaeNames& names) {
  const std::string who = std::string(names.model) + " decode: latent " + names.call;
  if (z.ndim() != 5 || z.dim(0) != 1 || z.dim(1) != channels || (frames > 0 ? z.dim(2) != frames : z.dim(2) < 1) ||
      z.dim(3) < 1 || z.dim(4) < 1)
    throw RuntimeFailure(who + " " + shape_str(z.shape()) + " is not [1, " + std::to_string(channels) + ", " +
                         (frames > 0 ? std::to_string(frames) : "n") + ", h, w]");
  cache.next = 0;
  if (!cache.started) {
    cache.h = z.dim(3);
    cache.w = z.dim(4);
    return true;
  }
  if (z.dim(3) != cache.h || z.dim(4) != cache.w)
    throw RuntimeFailure(who + " of " + std::to_string(z.dim(3)) + "x" + std::to_string(z.dim(4)) + " after " +
                         names.call + "s of " + std::to_string(cache.h) + "x" + std::to_string(cache.w));
  return false;
}

void start_causal_cache(CausalCache& cache, const std::vector<CausalSlot>& slots, CausalPad pad,
                        const Placement& place) {
  cache.pad = pad;
  cache.frames.clear();
  cache.frames.reserve(slots.size());
  for (const CausalSlot& s : slots) {
    const Shape shape = {1, s.channels, 2, cache.h * s.scale, cache.w * s.scale};
    cache.frames.push_back(pad == CausalPad::kZeros ? Tensor::zeros(shape, place.device, place.storage())
                                                    : place.empty(shape));
  }
}

Tensor causal_conv3d(Tensor x, const Conv3d& c, CausalCache& cache, const Placement& place, int64_t spatial_pad) {
  profile::ScopedTimer t("vae.conv3d");
  if (cache.next >= cache.frames.size()) throw std::logic_error("causal conv: more causal convs than cache slots");
  Tensor& slot = cache.frames[cache.next++];
  const int64_t ch = x.dim(1), frames = x.dim(2), h = x.dim(3), w = x.dim(4), hw = h * w;
  if (slot.shape() != Shape{1, ch, 2, h, w})
    throw std::logic_error("causal conv: cache slot " + shape_str(slot.shape()) + " for a conv input " +
                           shape_str(x.shape()));
  // [padding | chunk] along time, in the level's staging buffer.
  const int64_t in_frames = 2 + frames, need = ch * in_frames * hw;
  if (!cache.staging.defined() || cache.staging.numel() < need) {
    cache.staging = Tensor();
    cache.staging = place.empty({need});
  }
  Tensor in = cache.staging.slice0(0, need).reshape({1, ch, in_frames, h, w});
  if (cache.started || cache.pad == CausalPad::kZeros) {
    ops::copy_rows(slot, 0, 2 * hw, in, 0, in_frames * hw, ch, 2 * hw);
  } else {  // a first chunk under kFirstFrame: its first frame, twice
    for (int64_t f = 0; f < 2; ++f) ops::copy_rows(x, 0, frames * hw, in, f * hw, in_frames * hw, ch, hw);
  }
  ops::copy_rows(x, 0, frames * hw, in, 2 * hw, in_frames * hw, ch, frames * hw);
  x = Tensor();
  ops::copy_rows(in, frames * hw, in_frames * hw, slot, 0, 2 * hw, ch, 2 * hw);  // the last two input frames
  return c(in, {0, spatial_pad, spatial_pad});
}

void end_causal_call(CausalCache& cache, const CausalVaeNames& names) {
  if (cache.next != cache.frames.size())
    throw std::logic_error(std::string(names.model) + " decode: cache slots used do not match the model");
  cache.started = true;
}

void check_latent_video(const Tensor& z, int64_t channels, const CausalVaeNames& names) {
  if (z.ndim() != 5 || z.dim(0) != 1 || z.dim(1) != channels || z.dim(2) < 1)
    throw RuntimeFailure(std::string(names.model) + " decode: latents " + shape_str(z.shape()) + " are not [1, " +
                         std::to_string(channels) + ", F, h, w]");
}

void check_stream_latents(const Tensor& latents, int64_t channels, const CausalVaeNames& names) {
  if (latents.ndim() != 4 || latents.dim(0) != channels || latents.dim(1) < 1)
    throw RuntimeFailure(std::string(names.model) + " stream: latents " + shape_str(latents.shape()) + " are not [" +
                         std::to_string(channels) + ", n, h, w]");
}

Tensor decode_in_chunks(const Tensor& latents, const ChunkedDecode& d, const Placement& place,
                        const std::function<Tensor(const Tensor&)>& call, const CausalVaeNames& names) {
  const int64_t nd = latents.ndim(), c = latents.dim(nd - 4), latent_frames = latents.dim(nd - 3);
  const int64_t h = latents.dim(nd - 2), w = latents.dim(nd - 1), hw = h * w;
  const int64_t oc = d.out_channels, frames = d.frames, out_hw = hw * d.factor * d.factor;
  Tensor out = d.frames_first ? Tensor::empty({frames, oc, h * d.factor, w * d.factor})
                              : Tensor::empty({1, oc, frames, h * d.factor, w * d.factor});
  int64_t f0 = 0, done = 0;
  for (const int64_t n : d.chunks) {
    Tensor zi;
    if (n == latent_frames) {  // (C, F, h, w) is (1, C, F, h, w) in memory
      zi = latents.reshape({1, c, n, h, w});
    } else {
      zi = Tensor::empty({1, c, n, h, w});
      for (int64_t ch = 0; ch < c; ++ch)
        std::memcpy(zi.data() + ch * n * hw, latents.data() + (ch * latent_frames + f0) * hw, sizeof(float) * n * hw);
    }
    const Tensor y = call(place.put(zi)).to(Device::kCPU, DType::kF32);  // (1, oc, t, H, W)
    const int64_t t = y.dim(2);
    if (y.dim(1) != oc || done + t > frames || y.numel() != oc * t * out_hw)
      throw std::logic_error(std::string(names.model) + ": decoded " + shape_str(y.shape()) +
                             " differs from the config's frames");
    if (d.frames_first) {
      for (int64_t fr = 0; fr < t; ++fr)
        for (int64_t ch = 0; ch < oc; ++ch)
          std::memcpy(out.data() + ((done + fr) * oc + ch) * out_hw, y.data() + (ch * t + fr) * out_hw,
                      sizeof(float) * out_hw);
    } else {
      for (int64_t ch = 0; ch < oc; ++ch)
        std::memcpy(out.data() + (ch * frames + done) * out_hw, y.data() + ch * t * out_hw, sizeof(float) * t * out_hw);
    }
    done += t;
    f0 += n;
  }
  if (done != frames || f0 != latent_frames)
    throw std::logic_error(std::string(names.model) + ": decoded frame count differs from the config's");
  return out;
}

}  // namespace ditgen::models
