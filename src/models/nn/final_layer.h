// The output head of a DiT-style transformer: norm_out (LayerNorm without
// affine, eps 1e-6) scaled and shifted per sample, then proj_out to the
// patch outputs. The shift and scale come from the conditioning in one of
// two ways:
//   a linear of its SiLU        DiT: proj_out_1 (2D, D) on the
//                               conditioning (block 0's, as diffusers);
//   a (2, D) table plus it      PixArt, Latte (and Wan):
//                               scale_shift_table + the embedded timestep,
//                               no SiLU.
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

class FinalLayer {
 public:
  // DiT's: `modulation_prefix` ("proj_out_1.", (2D, D)) and `out_prefix` ("proj_out_2.", (out, D)).
  static TensorDecls linear_modulated_tensors(const std::string& modulation_prefix, const std::string& out_prefix,
                                              int64_t dim, int64_t out);
  static FinalLayer load_linear_modulated(const io::WeightStore& weights, const std::string& modulation_prefix,
                                          const std::string& out_prefix, const Placement& place);
  // PixArt's: the table `table_name` ("scale_shift_table", (2, D)) and `out_prefix` ("proj_out.").
  static TensorDecls table_modulated_tensors(const std::string& table_name, const std::string& out_prefix,
                                             int64_t dim, int64_t out);
  static FinalLayer load_table_modulated(const io::WeightStore& weights, const std::string& table_name,
                                         const std::string& out_prefix, const Placement& place);

  // (R, 2D) shift then scale from the conditioning (R, D).
  Tensor shift_scale(const Tensor& conditioning) const;
  // hidden (R, P, D) modulated by shift_scale (R, 2D) -> (R, P, out).
  Tensor operator()(const Tensor& hidden, const Tensor& shift_scale) const;

 private:
  static constexpr float kNormEps = 1e-6f;  // norm_out
  Placement place_;
  bool from_table_ = false;
  Linear modulation_;      // (2D, D): DiT's proj_out_1
  ScaleShiftTable table_;  // (2, D): adaLN-single's
  Linear proj_out_;        // (out, D)
};

}  // namespace ditgen::models::nn
