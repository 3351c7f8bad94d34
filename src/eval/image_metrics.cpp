// PSNR and SSIM; see image_metrics.h. SSIM is computed directly (window sums
// per position, double precision): the images it is used on are small
// (32x32 .. 512x512) and clarity beats speed here.
#include "eval/image_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ditgen::eval {

double psnr(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width, int64_t channels) {
  const int64_t n = height * width * channels;
  double se = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    se += d * d;
  }
  if (se == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(255.0 * 255.0 / (se / static_cast<double>(n)));
}

double ssim(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width, int64_t channels) {
  constexpr int kWindow = 11;
  constexpr double kSigma = 1.5, c1 = (0.01 * 255) * (0.01 * 255), c2 = (0.03 * 255) * (0.03 * 255);
  const int64_t wh = std::min<int64_t>(kWindow, height), ww = std::min<int64_t>(kWindow, width);
  // Separable Gaussian weights for the (possibly clipped) window, normalised.
  auto gaussian = [&](int64_t size) {
    std::vector<double> g(static_cast<size_t>(size));
    const double centre = (size - 1) / 2.0;
    double sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += g[i] = std::exp(-(i - centre) * (i - centre) / (2 * kSigma * kSigma));
    for (double& v : g) v /= sum;
    return g;
  };
  const std::vector<double> gy = gaussian(wh), gx = gaussian(ww);

  double total = 0;
  int64_t positions = 0;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y0 = 0; y0 + wh <= height; ++y0)
      for (int64_t x0 = 0; x0 + ww <= width; ++x0) {
        double mu_a = 0, mu_b = 0, aa = 0, bb = 0, ab = 0;
        for (int64_t y = 0; y < wh; ++y)
          for (int64_t x = 0; x < ww; ++x) {
            const int64_t i = ((y0 + y) * width + x0 + x) * channels + c;
            const double w = gy[y] * gx[x], va = a[i], vb = b[i];
            mu_a += w * va, mu_b += w * vb;
            aa += w * va * va, bb += w * vb * vb, ab += w * va * vb;
          }
        const double var_a = aa - mu_a * mu_a, var_b = bb - mu_b * mu_b, cov = ab - mu_a * mu_b;
        total += ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) /
                 ((mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2));
        ++positions;
      }
  return positions ? total / static_cast<double>(positions) : 1.0;
}

}  // namespace ditgen::eval
