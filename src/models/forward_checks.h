// The argument checks every text-conditional family's forward makes before
// any compute (models/transformer.h's ForwardArgs): the latents' shape
// against the model's channels and patch, one timestep per sample, the
// text's shape and key counts. Each calls fail(message) (the family's
// RuntimeFailure, "<Family> forward: ...") where a check fails.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "models/transformer.h"

namespace ditgen::models {

using ForwardFail = std::function<void(const std::string&)>;

// The text arguments against a batch of `batch` samples: text (batch, L,
// caption_channels), text_lengths empty or batch values in [1, L].
void check_text_args(const ForwardArgs& args, int64_t batch, int64_t caption_channels, const ForwardFail& fail);

// latents (B, channels, h, w) for an image model (patch[0] = 0: no frame
// axis) or (B, channels, F, h, w) for a video model, every axis positive and
// a multiple of its patch; B timesteps; the text (check_text_args).
// Returns B.
int64_t check_text_forward_args(const ForwardArgs& args, int64_t channels, std::array<int64_t, 3> patch,
                                int64_t caption_channels, const ForwardFail& fail);

}  // namespace ditgen::models
