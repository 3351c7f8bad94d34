// The parity checks a model family's forward test makes against diffusers'
// fixture output (test_latte.cpp, test_wan.cpp): a float32 forward within
// relative L2 1e-5 (max |d| / max |ref| 1e-4), and a bfloat16 one near the
// float32 reference but not equal to it (bfloat16 arithmetic really ran);
// and that a text model's batch is its samples' batches of one.
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "../ops/test_helpers.h"
#include "models/transformer.h"

namespace ditgen::testing {

inline void check_forward_float32(const models::Transformer& model, const models::ForwardArgs& args,
                                  const Tensor& ref, const std::string& what) {
  const Tensor y = model.forward(args);
  REQUIRE(y.shape() == ref.shape());
  const double err = rel_l2(y, ref), mx = max_rel(y, ref);
  MESSAGE(what << ": forward relative L2 error " << err << ", max|d|/max|ref| " << mx);
  CHECK(err <= 1e-5);
  CHECK(mx < 1e-4);
}

inline void check_forward_bfloat16(const models::Transformer& model, const models::ForwardArgs& args,
                                   const Tensor& ref, const std::string& what) {
  const Tensor y = model.forward(args);
  REQUIRE(y.shape() == ref.shape());  // rel_l2 reads ref.numel() values of both
  const double err = rel_l2(y, ref);
  MESSAGE(what << " bfloat16: forward relative L2 error " << err);
  CHECK(err < 2e-2);
  CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
}

// The forward of a text-conditional batch (args: latents, text, timesteps;
// no text_lengths), after checking that each sample run alone gives its row
// within relative L2 1e-6.
inline Tensor check_batch_of_one(const models::Transformer& model, const models::ForwardArgs& args) {
  const Tensor batch = model.forward(args);
  for (int64_t b = 0; b < args.latents->dim(0); ++b) {
    CAPTURE(b);
    const Tensor latents = args.latents->slice0(b, b + 1).clone(), text = args.text->slice0(b, b + 1).clone();
    models::ForwardArgs one;
    one.latents = &latents;
    one.text = &text;
    one.timesteps = {args.timesteps[static_cast<size_t>(b)]};
    CHECK(rel_l2(model.forward(one), batch.slice0(b, b + 1).clone()) < 1e-6);
  }
  return batch;
}

}  // namespace ditgen::testing
