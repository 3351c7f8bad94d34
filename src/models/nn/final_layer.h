// The output head of a DiT-style transformer: norm_out (LayerNorm without
// affine, eps 1e-6; Wan: its config's eps) scaled and shifted per sample, then proj_out to the
// patch outputs. The shift and scale come from the conditioning in one of
// two ways:
//   a linear of its SiLU        DiT: proj_out_1 (2D, D) on the
//                               conditioning (block 0's, as diffusers);
//   a (2, D) table plus it      PixArt, Latte (and Wan):
//                               scale_shift_table + the embedded timestep,
//                               no SiLU.
// proj_out's outputs are each token's patch in the order every family's
// unpatchify reads (ops::unpatchify, unpatchify3d: channels last inside the
// patch); a checkpoint that stores them channels first (CogVideoX: (c, i,
// j)) has its rows reordered once at load (`patch_channels_first`).
// Held whole on every rank. Profiling scope (util/profile.h): final_layer.
#pragma once
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "models/nn/linear.h"
#include "models/nn/modulation.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models::nn {

// Where a family's final layer takes its shift and scale from, and its tensors' names.
struct FinalLayerNames {
  enum class Modulation { kLinearOfSilu, kTable } by = Modulation::kTable;
  std::string modulation;  // the linear's prefix ("proj_out_1."), or the table's name ("scale_shift_table")
  std::string out;         // proj_out's prefix ("proj_out_2.", "proj_out.")
  bool table_leading_one = false;  // the table stored (1, 2, D) (Wan's)
  // proj_out's rows stored (c, patch position) with this many channels
  // (CogVideoX), loaded as (patch position, c); 0: stored channels last.
  int64_t patch_channels_first = 0;
};

class FinalLayer {
 public:
  // Its tensors: the modulation's (2D, D) linear or (2, D) table, proj_out (out, D).
  static TensorDecls tensors(const FinalLayerNames& names, int64_t dim, int64_t out);
  // `eps`: norm_out's (Wan: config eps).
  static FinalLayer load(const io::WeightStore& weights, const FinalLayerNames& names, const Placement& place,
                         float eps = 1e-6f);

  // (R, 2D) shift then scale from the conditioning (R, D).
  Tensor shift_scale(const Tensor& conditioning) const;
  // hidden (R, P, D) modulated by shift_scale (R, 2D) -> (R, P, out).
  Tensor operator()(const Tensor& hidden, const Tensor& shift_scale) const;

 private:
  float eps_ = 1e-6f;  // norm_out
  Placement place_;
  FinalLayerNames::Modulation by_ = FinalLayerNames::Modulation::kTable;
  Linear modulation_;      // (2D, D): DiT's proj_out_1
  ScaleShiftTable table_;  // (2, D): adaLN-single's
  Linear proj_out_;        // (out, D)
};

}  // namespace ditgen::models::nn
