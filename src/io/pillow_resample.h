// Pillow's resampling of an 8-bit RGB image, byte for byte as Pillow 13's
// Image.resize((width, height), filter) computes it (libImaging/Resample.c)
// with the whole image as the box and no reducing_gap, which is how both
// image-to-video preprocessors call it (diffusers' VaeImageProcessor.resize
// with its config's reducing_gap None; transformers' CLIPImageProcessor
// resize, which passes none).
//
// The algorithm, as Pillow's: a separable convolution, one axis after the
// other with an 8-bit image in between: horizontal first (only over the
// source rows the vertical pass reads), except that Pillow 13 goes vertical
// first when the height shrinks by more than twice as many pixels as the
// width. Per output pixel the filter is centred at
// (i + 0.5) * scale in source coordinates and, when downsampling, stretched
// by the scale (support = filter support * max(scale, 1)); its taps are
// normalised to sum 1 in double precision, then rounded to fixed point with
// 22 fractional bits; each sum starts at half a unit, is shifted right by 22
// and clipped to 0..255. Same size both ways: a copy; one axis the same:
// only the other pass.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "io/rgb_image.h"

namespace ditgen::io {

enum class ResampleFilter { kBilinear, kBicubic, kLanczos };

// The filter of a PIL.Image.Resampling code as config files store it
// ("resample": 1 LANCZOS, 2 BILINEAR, 3 BICUBIC); nothing for the others
// (0 NEAREST, 4 BOX, 5 HAMMING, ...), which no preprocessor here uses.
std::optional<ResampleFilter> resample_filter_from_pil_code(int64_t code);
const char* resample_filter_name(ResampleFilter filter);  // "lanczos", "bicubic", "bilinear"

// `image` resized to width x height (each >= 1; std::invalid_argument
// otherwise). Rows are spread over the OpenMP threads.
RgbImage pillow_resize(const RgbImage& image, int64_t width, int64_t height, ResampleFilter filter);

}  // namespace ditgen::io
