// See forward_checks.h.
#include "models/forward_checks.h"

namespace ditgen::models {

void check_text_args(const ForwardArgs& a, int64_t batch, int64_t caption_channels, const ForwardFail& fail) {
  if (!a.text || a.text->ndim() != 3 || a.text->dim(0) != batch || a.text->dim(1) < 1 ||
      a.text->dim(2) != caption_channels)
    fail("text " + (a.text ? shape_str(a.text->shape()) : std::string("(none)")) + " is not [" +
         std::to_string(batch) + ", L, " + std::to_string(caption_channels) + "] (caption_channels)");
  if (a.text_lengths.empty()) return;
  if (static_cast<int64_t>(a.text_lengths.size()) != batch)
    fail(std::to_string(a.text_lengths.size()) + " text lengths for a batch of " + std::to_string(batch));
  for (int32_t len : a.text_lengths)
    if (len < 1 || len > a.text->dim(1))
      fail("text length " + std::to_string(len) + " outside [1, " + std::to_string(a.text->dim(1)) + "]");
}

int64_t check_text_forward_args(const ForwardArgs& a, int64_t channels, std::array<int64_t, 3> patch,
                                int64_t caption_channels, const ForwardFail& fail) {
  const bool video = patch[0] > 0;
  const Tensor* x = a.latents;
  const int64_t first = 2;  // the first patched axis: F (a video) or h
  bool ok = x && x->ndim() == (video ? 5 : 4) && x->dim(1) == channels;
  for (int64_t axis = first; ok && axis < (video ? 5 : 4); ++axis) {
    const int64_t p = patch[static_cast<size_t>(axis - (video ? 2 : 1))];
    ok = x->dim(axis) > 0 && x->dim(axis) % p == 0;
  }
  if (!ok) {
    const std::string p = std::to_string(patch[1]);
    fail("latents " + (x ? shape_str(x->shape()) : std::string("(none)")) + " are not [B, " +
         std::to_string(channels) + (video ? ", F, h, w]" : ", h, w]") +
         (video && patch[0] > 1 ? " with F, h, w multiples of patch_size [" + std::to_string(patch[0]) + ", " + p +
                                      ", " + std::to_string(patch[2]) + "]"
                                : " with h and w multiples of patch_size " + p));
  }
  const int64_t batch = x->dim(0);
  if (static_cast<int64_t>(a.timesteps.size()) != batch)
    fail("batch of " + std::to_string(batch) + " latents with " + std::to_string(a.timesteps.size()) + " timesteps");
  check_text_args(a, batch, caption_channels, fail);
  return batch;
}

}  // namespace ditgen::models
