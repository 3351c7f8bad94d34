// What the matrices inside a transformer's blocks take in memory once
// placed, per element: the figure `plan` multiplies the layers' split
// weights by (parallel::ElementSizes::layer_matrices). Read from the file's
// tensor table only (no tensor is loaded), with the rules of
// models/placement.h: GGUF blocks stay blocks on the CPU (their stored
// bytes), model.quantize int8 makes one byte per weight plus a float scale
// per row, a float16 weight under float32 compute on the CPU stays float16,
// and anything else takes the compute dtype.
#pragma once
#include "io/safetensors.h"
#include "models/placement.h"

namespace ditgen::models {

// Bytes per element over the int8-eligible 2-D weights of `weights` (the
// blocks' attention and feed-forward matrices); 0 when it has none.
double block_matrix_bytes_per_element(const io::WeightStore& weights, const Placement& place);

}  // namespace ditgen::models
