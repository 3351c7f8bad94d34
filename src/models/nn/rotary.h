// Rotary position embedding (RoPE) as the attention module applies it: a
// table of cos and sin, one row per token of the whole sequence, on the
// model's device, and the hook that rotates a rank's q and k (nn::Rotary,
// called by nn::Attention after the projections and q/k norms) with the
// table rows of its own tokens: under sp and PipeFusion a rank holds a
// contiguous band of the sequence, which starts at token `first`. The
// families make the tables (Wan: ops::rotary_tables_3d over its token grid;
// CogVideoX: its resized, cropped grid in float32, the text's rows
// unrotated) and hand them here.
#pragma once
#include <cstdint>
#include <functional>

#include "models/placement.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// Rotary position embedding, applied in place to this rank's q and k (B,
// P, Dl) in the attention's layout (after any layout switch).
using Rotary = std::function<void(Tensor& q, Tensor& k)>;

class RotaryTable {
 public:
  RotaryTable() = default;
  // The host tables (n, head_dim) float32, moved once to place's device.
  RotaryTable(const ops::RotaryTables& host, const Placement& place);

  // The hook rotating q and k rows whose first is token `first` of the
  // sequence. The table must outlive it.
  Rotary rows_from(int64_t first) const;

 private:
  Tensor cos_, sin_;  // (n, head_dim) float32 on the device
};

// One axis of a rotary table as diffusers' get_1d_rotary_pos_embed(dim,
// pos, use_real=True, repeat_interleave_real=True) computes it in float32
// (theta 10000): pair k's angle pos / theta^(2k / dim), its cos and sin each
// written twice, into cos_out[0, dim) and sin_out[0, dim).
void rotary_axis_f32(float pos, int64_t dim, float* cos_out, float* sin_out);

}  // namespace ditgen::models::nn
