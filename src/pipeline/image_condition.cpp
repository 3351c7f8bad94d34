// See image_condition.h. Each function is a line or two of diffusers'
// prepare_latents or loop, written out over flat float32 arrays; the
// blends evaluate diffusers' expression as written, (1 - m) * c + m * x
// in float32, so frame 0 is the condition and the rest the latents
// exactly.
#include "pipeline/image_condition.h"

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/vae_image_input.h"

#include "util/error.h"

namespace ditgen::pipeline {
namespace {

void check_image(const Tensor& image, const char* what) {
  if (image.ndim() != 3 || image.dim(0) != 3)
    throw ConfigError(std::string("image-to-video: the ") + what + " must be (3, H, W), got " +
                      shape_str(image.shape()));
}

// (1 - m) * c + m * x over `n` values of one frame.
void blend(const float* condition, float mask, const float* latents, float* out, int64_t n) {
  const float keep = 1.0f - mask;
  for (int64_t i = 0; i < n; ++i) out[i] = keep * condition[i] + mask * latents[i];
}

// Latents (C, T', h, w) against an expand_timesteps condition (z, 1, h, w)
// and mask (T', h, w).
void check_expand(const ImageCondition& condition, const Shape& latent_shape) {
  const Tensor& c = condition.condition;
  const Tensor& m = condition.first_frame_mask;
  if (latent_shape.size() != 4 || m.ndim() != 3 || m.dim(0) != latent_shape[1] || m.dim(1) != latent_shape[2] ||
      m.dim(2) != latent_shape[3] || (c.defined() && (c.ndim() != 4 || c.dim(0) != latent_shape[0] || c.dim(1) != 1 ||
                                                      c.dim(2) != latent_shape[2] || c.dim(3) != latent_shape[3])))
    throw RuntimeFailure("image-to-video: latents " + shape_str(latent_shape) + " do not fit the condition " +
                         (c.defined() ? shape_str(c.shape()) : std::string("(none)")) + " and mask " +
                         shape_str(m.shape()));
}

void blend_expand(const ImageCondition& condition, const float* latents, const Shape& latent_shape, float* out) {
  check_expand(condition, latent_shape);
  const int64_t frames = latent_shape[1], plane = latent_shape[2] * latent_shape[3];
  const float* mask = condition.first_frame_mask.data();
  for (int64_t c = 0; c < latent_shape[0]; ++c)
    for (int64_t t = 0; t < frames; ++t) {
      const int64_t at = (c * frames + t) * plane;
      if (!condition.condition.defined()) {
        if (out != latents) std::memcpy(out + at, latents + at, static_cast<size_t>(plane) * sizeof(float));
        continue;
      }
      // The mask is one value a frame (its (h, w) plane is constant).
      blend(condition.condition.data() + c * plane, mask[t * plane], latents + at, out + at, plane);
    }
}

}  // namespace

Tensor video_condition(const Tensor& image, const Tensor* last_image, int64_t frames, ConditionMode mode) {
  check_image(image, "image");
  const int64_t height = image.dim(1), width = image.dim(2), plane = height * width;
  if (mode == ConditionMode::kExpandTimesteps) return image.reshape({3, 1, height, width}).clone();
  if (last_image) {
    check_image(*last_image, "last image");
    if (last_image->shape() != image.shape())
      throw ConfigError("image-to-video: the last image is " + shape_str(last_image->shape()) + ", the image " +
                        shape_str(image.shape()) + " (both are resized to the output's size)");
  }
  const int64_t given = last_image ? 2 : 1;
  if (frames < given + 1)
    throw ConfigError("image-to-video: " + std::to_string(frames) + " frames; at least " +
                      std::to_string(given + 1) + " with " + (last_image ? "a first and a last image" : "an image"));
  Tensor video = Tensor::zeros({3, frames, height, width});
  for (int64_t c = 0; c < 3; ++c) {
    float* channel = video.data() + c * frames * plane;
    std::memcpy(channel, image.data() + c * plane, static_cast<size_t>(plane) * sizeof(float));
    if (last_image)
      std::memcpy(channel + (frames - 1) * plane, last_image->data() + c * plane,
                  static_cast<size_t>(plane) * sizeof(float));
  }
  return video;
}

Tensor condition_mask(int64_t frames, int64_t temporal_factor, int64_t latent_height, int64_t latent_width,
                      bool last_image) {
  if (temporal_factor < 1 || frames < 1 || (frames - 1) % temporal_factor != 0)
    throw ConfigError("image-to-video: " + std::to_string(frames) + " frames; the VAE takes 1 + " +
                      std::to_string(temporal_factor) + "k");
  // diffusers: per frame 1 (given) or 0; frame 0's value repeated
  // temporal_factor times in front of frames 1.., regrouped t a latent frame.
  std::vector<float> given(static_cast<size_t>(frames), 0.0f);
  given[0] = 1.0f;
  if (last_image) given.back() = 1.0f;
  std::vector<float> expanded(static_cast<size_t>(temporal_factor), given[0]);
  expanded.insert(expanded.end(), given.begin() + 1, given.end());
  const int64_t latent_frames = static_cast<int64_t>(expanded.size()) / temporal_factor;
  const int64_t plane = latent_height * latent_width;
  Tensor mask = Tensor::empty({temporal_factor, latent_frames, latent_height, latent_width});
  for (int64_t c = 0; c < temporal_factor; ++c)
    for (int64_t t = 0; t < latent_frames; ++t) {
      float* out = mask.data() + (c * latent_frames + t) * plane;
      const float value = expanded[static_cast<size_t>(t * temporal_factor + c)];
      for (int64_t i = 0; i < plane; ++i) out[i] = value;
    }
  return mask;
}

Tensor first_frame_mask(int64_t latent_frames, int64_t latent_height, int64_t latent_width, bool image) {
  Tensor mask = Tensor::full({latent_frames, latent_height, latent_width}, 1.0f);
  if (image)
    for (int64_t i = 0; i < latent_height * latent_width; ++i) mask[i] = 0.0f;
  return mask;
}

ImageCondition encode_image_condition(const models::VaeEncoder& encoder, const Tensor& image,
                                      const Tensor* last_image, int64_t frames, int64_t temporal_factor,
                                      ConditionMode mode) {
  ImageCondition out;
  out.mode = mode;
  const Tensor latents = encoder.encode(video_condition(image, last_image, frames, mode));  // (z, T'|1, h, w)
  const int64_t z = latents.dim(0), h = latents.dim(2), w = latents.dim(3);
  if (mode == ConditionMode::kExpandTimesteps) {
    out.condition = latents;
    out.first_frame_mask = first_frame_mask((frames - 1) / temporal_factor + 1, h, w, /*image=*/true);
    return out;
  }
  const Tensor mask = condition_mask(frames, temporal_factor, h, w, last_image != nullptr);
  if (mask.dim(1) != latents.dim(1))
    throw RuntimeFailure("image-to-video: the VAE gave " + std::to_string(latents.dim(1)) + " latent frames for " +
                         std::to_string(frames) + " frames; the mask has " + std::to_string(mask.dim(1)));
  out.condition = Tensor::empty({mask.dim(0) + z, latents.dim(1), h, w});
  std::memcpy(out.condition.data(), mask.data(), mask.nbytes());
  std::memcpy(out.condition.data() + mask.numel(), latents.data(), latents.nbytes());
  return out;
}

ImageCondition text_only_expand_condition(int64_t latent_frames, int64_t latent_height, int64_t latent_width) {
  ImageCondition out;
  out.mode = ConditionMode::kExpandTimesteps;
  out.first_frame_mask = first_frame_mask(latent_frames, latent_height, latent_width, /*image=*/false);
  return out;
}

std::vector<ImageCondition> image_conditions(const std::vector<OutputImages>& images,
                                             const models::VaeEncoder& encoder, int64_t height, int64_t width,
                                             int64_t frames, int64_t spatial_factor, int64_t temporal_factor,
                                             ConditionMode mode) {
  std::map<std::pair<const void*, const void*>, ImageCondition> encoded;  // by the files' decoded images
  std::vector<ImageCondition> out;
  for (const OutputImages& o : images) {
    if (!o.image) {
      if (mode != ConditionMode::kExpandTimesteps)
        throw std::invalid_argument("image_conditions: an output without an image for a model that needs one");
      out.push_back(text_only_expand_condition((frames - 1) / temporal_factor + 1, height / spatial_factor,
                                               width / spatial_factor));
      continue;
    }
    const auto key =
        std::make_pair(static_cast<const void*>(o.image.get()), static_cast<const void*>(o.last_image.get()));
    auto it = encoded.find(key);
    if (it == encoded.end()) {
      const Tensor image = io::vae_image_input(o.image->image.rgb, height, width, spatial_factor);
      Tensor last;
      if (o.last_image) last = io::vae_image_input(o.last_image->image.rgb, height, width, spatial_factor);
      it = encoded
               .emplace(key, encode_image_condition(encoder, image, o.last_image ? &last : nullptr, frames,
                                                    temporal_factor, mode))
               .first;
    }
    out.push_back(it->second);
  }
  return out;
}

int64_t model_input_channels(const ImageCondition& condition, int64_t channels) {
  return condition.mode == ConditionMode::kChannels ? channels + condition.condition.dim(0) : channels;
}

void write_model_input(const ImageCondition& condition, const float* latents, const Shape& latent_shape,
                       float* model_in) {
  if (condition.mode == ConditionMode::kExpandTimesteps) {
    blend_expand(condition, latents, latent_shape, model_in);
    return;
  }
  const Tensor& c = condition.condition;
  if (latent_shape.size() != 4 || c.ndim() != 4 || c.dim(1) != latent_shape[1] || c.dim(2) != latent_shape[2] ||
      c.dim(3) != latent_shape[3])
    throw RuntimeFailure("image-to-video: latents " + shape_str(latent_shape) + " do not fit the condition " +
                         shape_str(c.shape()));
  const size_t latent_bytes = static_cast<size_t>(shape_numel(latent_shape)) * sizeof(float);
  std::memcpy(model_in, latents, latent_bytes);
  std::memcpy(model_in + shape_numel(latent_shape), c.data(), c.nbytes());
}

std::vector<float> token_timesteps(const Tensor& first_frame_mask, float timestep, int64_t patch_height,
                                   int64_t patch_width) {
  const int64_t frames = first_frame_mask.dim(0), h = first_frame_mask.dim(1), w = first_frame_mask.dim(2);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(frames * ((h + patch_height - 1) / patch_height) *
                                  ((w + patch_width - 1) / patch_width)));
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t y = 0; y < h; y += patch_height)
      for (int64_t x = 0; x < w; x += patch_width) out.push_back(first_frame_mask[(t * h + y) * w + x] * timestep);
  return out;
}

void replace_first_frame(const ImageCondition& condition, float* latents, const Shape& latent_shape) {
  if (condition.mode != ConditionMode::kExpandTimesteps || !condition.condition.defined()) return;
  blend_expand(condition, latents, latent_shape, latents);
}

}  // namespace ditgen::pipeline
