// Initial latent noise: standard normals from Philox4x32-10
// (kernels/math/philox.h), indexed by position so that the noise of an image
// depends only on its own seed (docs/design.md §2, `seed`).
//
// Layout: image i of the batch uses key = seed + i; element j of that image
// (row-major within the per-image shape) is normal j % 4 of counter block
// j / 4. Each Philox call yields 4 words = 2 Box-Muller pairs = 4 normals.
// So image i of a batch started at `seed` equals image 0 of a batch started
// at seed + i, whatever the batch size, and any rank can draw any slice.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace ditgen::sched {

// Returns [images, per_image_shape...] standard normals. `stream` selects an
// independent sequence for other uses of noise (0: the initial latents).
Tensor gaussian_noise(const Shape& per_image_shape, int64_t images, uint64_t seed,
                      uint32_t stream = 0);

// Fills out[0, count) with elements [first, first + count) of one image's
// noise (key = seed): the building block for drawing only a shard.
void gaussian_noise_fill(float* out, int64_t first, int64_t count, uint64_t seed,
                         uint32_t stream = 0);

}  // namespace ditgen::sched
