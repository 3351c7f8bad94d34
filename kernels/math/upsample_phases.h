// Nearest x2 upsampling followed by a 3x3 convolution (stride 1, zero
// padding 1), as every VAE decoder's upsampler does it, computed without
// the upsampled image: output row 2i + p (phase p) sees input rows
// {i-1, i, i} (p = 0) or {i, i, i+1} (p = 1), so each phase is a 2x2
// convolution of the input whose taps are sums of the 3x3 kernel's.
// Stacking the four phases (py, px) as 4 Cout output channels of one 2x2
// convolution with zero padding 1 gives y (4 Cout, H+1, W+1); phase
// (py, px)'s pixel (i, j) is y at (i + py, j + px). 16 multiply-adds per
// output pixel and input channel instead of 36. Shared by the CPU and CUDA
// implementations of ops::interleave_upsample_phases and by the weights'
// transform (models/nn/upsample_conv.cpp).
#pragma once
#include <cstdint>

#include "kernels/math/hd.h"

namespace ditgen::math {

// The 2x2 tap (0 or 1) that the 3x3 tap k (0..2) of output phase p (0 or 1)
// adds into: phase 0 reads input offsets {-1, 0} (k 0 -> 0; k 1, 2 -> 1),
// phase 1 offsets {0, +1} (k 0, 1 -> 0; k 2 -> 1).
DITGEN_HD int upsample_phase_tap(int phase, int k) { return phase == 0 ? (k == 0 ? 0 : 1) : (k == 2 ? 1 : 0); }

// The element of the stacked phase output y (4 C, H + 1, W + 1) (one
// batch item) that output pixel (c, yo, xo) of the (C, 2H, 2W) result is.
DITGEN_HD int64_t upsample_phase_source(int64_t c, int64_t yo, int64_t xo, int64_t channels, int64_t height,
                                        int64_t width) {
  const int64_t py = yo & 1, px = xo & 1;
  return (((2 * py + px) * channels + c) * (height + 1) + (yo >> 1) + py) * (width + 1) + (xo >> 1) + px;
}

}  // namespace ditgen::math
