// Full-reference image quality measures, for comparing an output against a
// reference output of the same size (PAB on vs off, docs/design.md §5/§7).
// Images are row-major [height, width, channels] uint8.
//  PSNR: 10·log10(255² / MSE) over all values; +infinity for identical images.
//  SSIM: Wang et al. (2004) with their constants: 11x11 Gaussian window,
//        sigma 1.5, K1 = 0.01, K2 = 0.03, L = 255, over the "valid" window
//        positions (no padding), per channel, averaged over channels. Images
//        smaller than the window use a window clipped to the image.
#pragma once
#include <cstdint>

namespace ditgen::eval {

double psnr(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width, int64_t channels);
double ssim(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width, int64_t channels);

}  // namespace ditgen::eval
