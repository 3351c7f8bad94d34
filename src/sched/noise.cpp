// Philox noise on the CPU: one Philox call per block of 4 elements, blocks
// spread over OpenMP threads (each block is independent, so the result does
// not depend on the thread count).
#include "sched/noise.h"

#include "kernels/math/philox.h"

namespace ditgen::sched {

void gaussian_noise_fill(float* out, int64_t first, int64_t count, uint64_t seed,
                         uint32_t stream) {
  if (count <= 0) return;
  const philox::U32x2 key = philox::key_from_seed(seed);
  const int64_t end = first + count;
  const int64_t block_begin = first / 4;
  const int64_t block_end = (end + 3) / 4;
#pragma omp parallel for schedule(static) if (block_end - block_begin > 4096)
  for (int64_t b = block_begin; b < block_end; ++b) {
    const philox::F32x4 z =
        philox::normal4(philox::counter_from_block(static_cast<uint64_t>(b), stream), key);
    // A partial block at either end of [first, end) keeps only its elements.
    for (int k = 0; k < 4; ++k) {
      const int64_t j = b * 4 + k;
      if (j >= first && j < end) out[j - first] = z.v[k];
    }
  }
}

Tensor gaussian_noise(const Shape& per_image_shape, int64_t images, uint64_t seed,
                      uint32_t stream) {
  Shape shape{images};
  shape.insert(shape.end(), per_image_shape.begin(), per_image_shape.end());
  Tensor t = Tensor::empty(shape);
  const int64_t per_image = shape_numel(per_image_shape);
  for (int64_t i = 0; i < images; ++i) {
    gaussian_noise_fill(t.data() + i * per_image, 0, per_image,
                        seed + static_cast<uint64_t>(i), stream);
  }
  return t;
}

}  // namespace ditgen::sched
