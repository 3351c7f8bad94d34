// See vae_patches.h. One loop walks every patched value once; the pixel it
// belongs to is computed, and `to_patches` says which way the value moves.
#include "models/nn/vae_patches.h"

#include <stdexcept>
#include <string>

namespace ditgen::models::nn {

namespace {

void check_host_5d(const Tensor& x, const char* what) {
  if (x.ndim() != 5 || x.device() != Device::kCPU || x.dtype() != DType::kF32)
    throw std::invalid_argument(std::string(what) + ": " + shape_str(x.shape()) + " is not a host float32 (N, C, S, H, W)");
}

// patched (N, C p^2, S, h, w) <-> pixels (N, C, S, h p, w p).
void move_patches(const Tensor& from, Tensor& to, int64_t p, bool to_patches) {
  const Tensor& patched = to_patches ? to : from;
  const int64_t n = patched.dim(0), cp = patched.dim(1), s = patched.dim(2), h = patched.dim(3), w = patched.dim(4);
  const int64_t c = cp / (p * p), hw = h * w, big_w = w * p, big_hw = h * p * big_w;
  float* out = to.data();
  const float* in = from.data();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < p; ++i)      // column offset
        for (int64_t j = 0; j < p; ++j)    // row offset
          for (int64_t f = 0; f < s; ++f) {
            const int64_t k = (ch * p + i) * p + j;
            const int64_t patch_plane = ((b * cp + k) * s + f) * hw, pixel_plane = ((b * c + ch) * s + f) * big_hw;
            for (int64_t y = 0; y < h; ++y)
              for (int64_t x = 0; x < w; ++x) {
                const int64_t pi = patch_plane + y * w + x, xi = pixel_plane + (y * p + j) * big_w + x * p + i;
                if (to_patches)
                  out[pi] = in[xi];
                else
                  out[xi] = in[pi];
              }
          }
}

}  // namespace

Tensor patchify_pixels(const Tensor& x, int64_t p) {
  check_host_5d(x, "patchify");
  if (p < 1 || x.dim(3) % p != 0 || x.dim(4) % p != 0)
    throw std::invalid_argument("patchify: " + shape_str(x.shape()) + " is not in whole " + std::to_string(p) + "x" +
                                std::to_string(p) + " patches");
  if (p == 1) return x;
  Tensor out = Tensor::empty({x.dim(0), x.dim(1) * p * p, x.dim(2), x.dim(3) / p, x.dim(4) / p});
  move_patches(x, out, p, true);
  return out;
}

Tensor unpatchify_pixels(const Tensor& x, int64_t p) {
  check_host_5d(x, "unpatchify");
  if (p < 1 || x.dim(1) % (p * p) != 0)
    throw std::invalid_argument("unpatchify: " + shape_str(x.shape()) + " has no whole " + std::to_string(p * p) +
                                " channels a patch");
  if (p == 1) return x;
  Tensor out = Tensor::empty({x.dim(0), x.dim(1) / (p * p), x.dim(2), x.dim(3) * p, x.dim(4) * p});
  move_patches(x, out, p, false);
  return out;
}

}  // namespace ditgen::models::nn
