// Where a model's weights and activations live, and in what dtype it
// computes (model.dtype resolved, docs/design.md §2-3). Weights are moved there
// once at load; forward passes take and return host float32 tensors, so
// pipelines and schedulers stay on the CPU whatever the device.
//
// dtype is the compute dtype. On CUDA it is the storage and arithmetic of
// every weight and activation. On the CPU it is the dtype of the GEMM
// weights, which is the GEMMs' arithmetic (ops.h: a bfloat16 weight makes a
// bfloat16 GEMM, float32 sums) and, through the model's attention calls,
// the attention's; activations, norms, modulation and every other weight
// stay float32 there (storage()).
//
// Four kinds of weight: matrix() for the GEMM weights (what ops::linear /
// linear_into take as w: on a CPU with native bfloat16 matmuls a bfloat16
// one is packed into oneDNN's blocked layout, ops::pack_gemm_weight, unless
// pack_weights is off; a GGUF weight in a block format stays in its blocks,
// borrowed from the file, and the CPU GEMM dequantizes it band by band in
// the compute dtype (on CUDA its blocks are uploaded and dequantized on the
// device, once, into the compute dtype); under int8 (model.quantize) the GEMM weights of the
// transformer blocks become W8A8 int8, the rest keep the compute dtype as
// the GGUF files keep them: int8_eligible),
// table() for a table in the compute dtype whose rows are read (T5's token
// embedding), conv() for convolution weights, put() for everything else
// (biases, norms). A weight already in the dtype it needs is borrowed from
// the mmapped file, never copied; otherwise it is converted once, here. One
// exception keeps memory: a float16 GEMM weight under float32 compute on the
// CPU stays float16 (the GEMM widens it exactly, block by block, so the
// arithmetic is float32 all the same).
#pragma once
#include <string>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

namespace ditgen::models {

struct Placement {
  Device device = Device::kCPU;
  DType dtype = DType::kF32;  // the compute dtype (see above)
  // Whether matrix() packs (ops::pack_gemm_weight): worth it for weights
  // read many times per load (a transformer's, steps x CFG), not for the
  // text encoder's, read once per prompt: packing T5-XXL is a pass over
  // 9.5 GB that costs more than the 15% it saves on one encode.
  bool pack_weights = true;
  // model.quantize "int8": the eligible GEMM weights quantized to W8A8
  // int8 at load (ops::quantize_gemm_weight; CPU only).
  bool int8 = false;

  Placement() = default;
  Placement(Device d, DType t, bool pack = true) : device(d), dtype(t), pack_weights(pack) {}

  // Activations and non-GEMM weights: float32 on the CPU, dtype on CUDA.
  DType storage() const { return device == Device::kCPU ? DType::kF32 : dtype; }
  // A weight or table in this placement (no copy when already there: CPU
  // float32 weights stay borrowed from the mmapped file).
  Tensor put(const Tensor& t) const { return t.to(device, storage()); }
  // A table read by rows: in the compute dtype (as stored, no copy, when it
  // already is, and a float16 one under float32 on the CPU).
  Tensor table(const Tensor& t) const {
    if (device == Device::kCPU && dtype == DType::kF32 && t.dtype() == DType::kF16) return t;
    return t.to(device, dtype);
  }
  // A GEMM weight: as table(), then in the layout the GEMM reads fastest; a
  // block-quantized one stays in its blocks on the CPU (computed in the
  // compute dtype, float16 as float32); on CUDA its blocks are uploaded as
  // the file stores them and dequantized there into the compute dtype, so
  // no float copy of it is ever made on the host.
  // `name` (the stored tensor's) decides int8 (int8_eligible).
  Tensor matrix(const Tensor& t, const std::string& name = "") const {
    if (int8 && device == Device::kCPU && int8_eligible(name)) return ops::quantize_gemm_weight(t);
    if (t.layout() == Layout::kBlockQuantized) {
      if (device == Device::kCPU) return t.with_arithmetic(block_arithmetic());
      return ops::dequantize_gemm_weight(t.blocks_to(device), dtype);
    }
    return pack_weights ? ops::pack_gemm_weight(table(t)) : table(t);
  }
  // The arithmetic of a GEMM on a block-quantized weight: bfloat16, or
  // float32 (float16 computes as float32 there).
  DType block_arithmetic() const { return dtype == DType::kBF16 ? DType::kBF16 : DType::kF32; }
  // Which GEMM weights model.quantize "int8" quantizes: those inside the
  // transformer blocks (a name under blocks., transformer_blocks. or
  // temporal_transformer_blocks.) except their norms' modulation linears
  // (adaLN's norm1.linear); the embeddings, the time and text projections,
  // the adaLN-single and the final projection keep the compute dtype, as
  // the published GGUF files keep them unquantized (docs/quantized.md).
  static bool int8_eligible(const std::string& name) {
    const bool in_block = name.rfind("blocks.", 0) == 0 || name.rfind("transformer_blocks.", 0) == 0 ||
                          name.rfind("temporal_transformer_blocks.", 0) == 0;
    return in_block && name.find("norm") == std::string::npos;
  }
  // A convolution weight: in the compute dtype (the CPU's convolution takes
  // float32 or bfloat16, its weight's dtype being its arithmetic).
  Tensor conv(const Tensor& t) const { return t.to(device, dtype); }
  Tensor empty(Shape shape) const { return Tensor::empty(std::move(shape), device, storage()); }
};

// `placed`, made from `source` (all or part of the stored tensor `name`: a
// view of the file from load / load_rows, or columns load_cols copied out
// of it) by one of place's methods. When that made a copy of a view, the
// file pages under the view are released from this process at once, so
// loading a model tensor by tensor never holds the whole source checkpoint
// resident (a float32 checkpoint run in bfloat16 peaks near its bfloat16
// size); load_cols released its own pages already.
inline Tensor release_source(const io::WeightStore& weights, const std::string& name, const Tensor& source,
                             Tensor placed) {
  if (placed.raw() == source.raw()) return placed;  // still the source itself
  // Asked without loading: a load of a tensor a LoRA changes is a whole
  // float32 copy with the change merged (io/weight_edits.h), made again
  // only to learn an address.
  if (weights.points_into_file(name, source)) weights.release_pages(name, source);
  return placed;
}

// `source` placed as a GEMM weight by place.matrix(), its file pages
// released as above. The CPU's GEMM reads a block-quantized weight in place
// in the file; a device's copied it (its blocks uploaded), so its pages go.
inline Tensor place_matrix(const io::WeightStore& weights, const std::string& name, const Tensor& source,
                           const Placement& place) {
  if (source.layout() == Layout::kBlockQuantized) {
    Tensor placed = place.matrix(source, name);
    if (!placed.is_cpu() && weights.points_into_file(name, source)) weights.release_pages(name, source);
    return placed;
  }
  return release_source(weights, name, source, place.matrix(source, name));
}

// The whole table `name`, placed by place.table(), its file pages released.
inline Tensor load_table(const io::WeightStore& weights, const std::string& name, const Placement& place) {
  const Tensor source = weights.load(name);
  return release_source(weights, name, source, place.table(source));
}

// Rows [begin, end) of the GEMM weight `name`, placed as place_matrix says:
// a GGUF weight in a block format in its blocks, anything else a view of
// the file's rows placed.
inline Tensor load_matrix_rows(const io::WeightStore& weights, const std::string& name, int64_t begin, int64_t end,
                               const Placement& place) {
  if (auto blocks = weights.load_block_rows(name, begin, end, place.block_arithmetic()))
    return place_matrix(weights, name, *blocks, place);
  return place_matrix(weights, name, weights.load_rows(name, begin, end), place);
}

// Columns [begin, end) of the GEMM weight `name` (tensor parallelism's
// row-split layers), placed as place_matrix says.
inline Tensor load_matrix_cols(const io::WeightStore& weights, const std::string& name, int64_t begin, int64_t end,
                               const Placement& place) {
  if (auto blocks = weights.load_block_cols(name, begin, end, place.block_arithmetic()))
    return place_matrix(weights, name, *blocks, place);
  return place_matrix(weights, name, weights.load_cols(name, begin, end), place);
}

// The whole GEMM weight `name`, placed as place_matrix says.
inline Tensor load_matrix(const io::WeightStore& weights, const std::string& name, const Placement& place) {
  const Shape& shape = weights.info(name).shape;
  if (shape.size() == 2) return load_matrix_rows(weights, name, 0, shape[0], place);
  return place_matrix(weights, name, weights.load(name), place);
}

}  // namespace ditgen::models
