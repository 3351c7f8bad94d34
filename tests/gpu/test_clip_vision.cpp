// The CLIP vision encoder (models/clip_vision.h) placed on the GPU, against
// transformers' hidden_states[-2] on the committed fixture
// (tests/fixtures/clip_vision, as tests/models/test_clip_vision.cpp on the
// CPU): float32 at 1e-5 (the CPU test's 1e-6 with room for cuBLAS's and the
// attention kernel's summation order), bfloat16 (every activation in
// bfloat16 on the device) held to 3e-2 of transformers' bfloat16 run.
#include <doctest/doctest.h>

#include <string>

#include "io/safetensors.h"
#include "models/clip_vision.h"
#include "models/fixture.h"
#include "ops/test_helpers.h"

using namespace ditgen;

namespace {

Tensor expected(const std::string& name) {
  return io::SafetensorsFile::open(testing::fixture_dir("clip_vision") + "/expected.safetensors")
      ->load(name)
      .to(DType::kF32)
      .clone();
}

Tensor encode_on_cuda(DType dtype) {
  return models::load_clip_vision(testing::fixture_dir("clip_vision") + "/image_encoder", {Device::kCUDA, dtype})
      ->encode(expected("pixel_values"));
}

}  // namespace

TEST_CASE("CLIP vision encoder on CUDA matches transformers (float32, bfloat16 loosely)") {
  const double f32 = testing::rel_l2(encode_on_cuda(DType::kF32), expected("hidden_f32"));
  MESSAGE("CUDA float32: relative L2 " << f32);
  CHECK(f32 <= 1e-5);
  const double bf16 = testing::rel_l2(encode_on_cuda(DType::kBF16), expected("hidden_bf16"));
  MESSAGE("CUDA bfloat16: relative L2 " << bf16 << " to transformers' bfloat16");
  CHECK(bf16 < 3e-2);
}
