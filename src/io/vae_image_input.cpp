// diffusers' VAE image preprocessing, step for step (see the header).
#include "io/vae_image_input.h"

#include <string>

#include "io/pillow_resample.h"
#include "util/error.h"

namespace ditgen::io {

Tensor vae_image_input(const RgbImage& image, std::optional<int64_t> height, std::optional<int64_t> width,
                       int64_t vae_scale_factor) {
  const int64_t h = height.value_or(image.height), w = width.value_or(image.width);
  const int64_t out_h = h - h % vae_scale_factor, out_w = w - w % vae_scale_factor;
  if (out_h < 1 || out_w < 1)
    throw ConfigError("image-to-video: a " + std::to_string(w) + " x " + std::to_string(h) +
                      " VAE input rounds down to " + std::to_string(out_w) + " x " + std::to_string(out_h) +
                      " at the VAE's scale factor " + std::to_string(vae_scale_factor));
  const RgbImage resized = pillow_resize(image, out_w, out_h, ResampleFilter::kLanczos);
  Tensor out = Tensor::empty({3, out_h, out_w});
  float* dst = out.data();
  const int64_t plane = out_h * out_w;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      const float x = static_cast<float>(resized.pixels[static_cast<size_t>(3 * i + c)]) / 255.0f;
      dst[c * plane + i] = 2.0f * x - 1.0f;
    }
  return out;
}

}  // namespace ditgen::io
