// The parts the VAE decoders share (models/vae_decoder_parts.h). The causal
// conv itself is nn::CausalConv3d (models/nn/causal_conv3d.h); here its
// cache's call protocol.
#include "models/vae_decoder_parts.h"

#include <cstring>
#include <set>
#include <stdexcept>

#include "ops/ops.h"
#include "util/error.h"

namespace ditgen::models {

UpBlockChannels reversed_up_blocks(const std::vector<int64_t>& block_out_channels) {
  UpBlockChannels c;
  c.out.assign(block_out_channels.rbegin(), block_out_channels.rend());
  for (size_t i = 0; i < c.out.size(); ++i) c.in.push_back(c.out[i == 0 ? 0 : i - 1]);
  return c;
}

std::string up_block_prefix(size_t i) { return "decoder.up_blocks." + std::to_string(i) + "."; }

void walk_up_blocks(const UpBlockChannels& channels, int64_t per_block,
                    const std::function<void(const UpResnet&)>& resnet,
                    const std::function<void(size_t, const std::string&)>& block_end) {
  for (size_t i = 0; i < channels.out.size(); ++i) {
    const std::string ub = up_block_prefix(i);
    for (int64_t j = 0; j < per_block; ++j) {
      const int64_t cin = j == 0 ? channels.in[i] : channels.out[i];
      resnet({i, ub + "resnets." + std::to_string(j) + ".", cin, channels.out[i]});
    }
    block_end(i, ub);
  }
}

void check_decoder_tensors(const io::WeightStore& w, const nn::TensorDecls& declared, const std::string& keys) {
  check_declared_tensors(w, declared, {"decoder.", "post_quant_conv."}, keys);
}

void check_declared_tensors(const io::WeightStore& w, const nn::TensorDecls& declared,
                            const std::vector<std::string>& prefixes, const std::string& keys) {
  nn::check_tensors(w, declared);
  std::set<std::string> names;
  for (const nn::TensorDecl& d : declared) names.insert(nn::stored_name(w, d));
  for (const std::string& name : w.names())
    for (const std::string& prefix : prefixes)
      if (name.rfind(prefix, 0) == 0 && !names.count(name))
        throw ModelError(w.file_of(name) + ": holds '" + name + "', which config.json (" + keys +
                         ") does not account for");
}

bool begin_causal_call(nn::CausalCache& cache, const Tensor& z, int64_t channels, int64_t frames,
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

void start_causal_cache(nn::CausalCache& cache, const std::vector<CausalSlot>& slots, nn::CausalPad pad,
                        const Placement& place) {
  cache.pad = pad;
  cache.frames.clear();
  cache.frames.reserve(slots.size());
  // In the convolutions' dtype (Placement::conv), not the activations': a
  // bfloat16 convolution rounds its input to bfloat16 anyway, so bfloat16
  // slots pad it with the same values at half the memory (CogVideoX-2b at
  // 9 x 256 x 256: 1 GiB of float32 slots, resident from a video's second
  // chunk on).
  for (const CausalSlot& s : slots) {
    const Shape shape = {1, s.channels, 2, cache.h * s.scale, cache.w * s.scale};
    cache.frames.push_back(pad == nn::CausalPad::kZeros ? Tensor::zeros(shape, place.device, place.dtype)
                                                    : Tensor::empty(shape, place.device, place.dtype));
  }
}

void end_causal_call(nn::CausalCache& cache, const CausalVaeNames& names) {
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
