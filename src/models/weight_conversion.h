// `ditgen convert`'s model side: which part of which model an input is, its
// weights under the model's names, and how each tensor is written (the
// writing itself is io's: io/weight_convert.h).
//
// Names: the family's single-file naming (TransformerSpec::
// single_file_naming): a Wan transformer in the original Wan names, as
// city96's GGUF files and ComfyUI's safetensors have them; the other
// families, text encoders and VAEs in the names their diffusers folders use.
// general.architecture: the naming's ("wan"), else the family's registry
// name ("dit", "pixart", "latte", "cogvideox", "t5", "vae"), else a GGUF
// input's own; a lone diffusers-named file that tells none gets none.
//
// Types, after city96's Wan GGUF files (tests/fixtures/wan_quant/reference/
// case.json, "conventions"), one type for every quantized tensor (no
// Q4_K_M-style mixes):
//  - a block type (Q8_0 .. Q6_K) quantizes the 2-D tensors named
//    "...weight" inside the transformer blocks (Placement::int8_eligible:
//    not the norms' modulation linears; not the patch, text and time
//    embeddings or the final projection, which llama-quantize's Wan rules
//    keep); one whose rows are no whole number of blocks falls back to F16,
//    as llama-quantize does for the K-quants; every other tensor is F32,
//    as in city96's Wan 2.1 files, quantized from an all-F32 base (the 5-D
//    patch embedding stays 5-D). A text encoder's block type applies to every 2-D
//    "...weight" but T5's relative attention bias (llama.cpp's t5encoder
//    files); a VAE keeps every tensor F32 (its weights are convolutions;
//    no published GGUF quantizes a VAE);
//  - F16 / BF16 (city96's convert.py): F32 for 1-D tensors, tensors of at
//    most 1024 values, names holding ".modulation" and tensors of more than
//    4 dimensions; the type given for the rest;
//  - F32: every tensor F32;
//  - a safetensors file (F32, F16 or BF16): every tensor in the type given,
//    as ComfyUI's repackaged files are.
// Tensors are written sorted by their output names (city96's files are).
// ComfyUI's scaled float8 files convert with each weight multiplied by its
// scale; the scales and the scaled_fp8 marker are not written.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/weight_convert.h"
#include "models/registry.h"

namespace ditgen::models {

struct ConversionInput {
  io::WeightStore weights;   // under the model's names
  Part part = Part::kTransformer;
  std::string family;        // "wan", "t5", ...; "" when a lone file does not tell
  std::string architecture;  // general.architecture to write; "" for none
  // The output file's name of a model's tensor (nullopt: that naming has
  // none); unset: the model's names.
  std::function<std::optional<std::string>(const std::string&)> file_name;
};

// The components --component names: a diffusers model folder's subfolders.
const std::vector<std::string>& conversion_components();

// `input`: a diffusers model folder (model_index.json: `component` picks
// its subfolder), one part's folder (config.json and safetensors:
// `component` says which part it is) or one file of weights (safetensors or
// GGUF, in the model's names or the family's single-file naming, ComfyUI's
// prefix allowed: `component` says which part). ConfigError (exit 2) for a
// component not in conversion_components(); ModelError (exit 3) for an
// input that is not there, a component the model lacks, or files that are
// no model's weights.
ConversionInput open_conversion_input(const std::string& input, const std::string& component);

// Every tensor to write and its output name and type (see above) for a GGUF
// file, or for a safetensors one (`gguf` false; `type` F32, F16 or BF16).
// ModelError naming the tensor for one of no floating type or without a
// name in the family's naming.
std::vector<io::ConvertedTensor> conversion_plan(const ConversionInput& input, io::GgmlType type, bool gguf);

// The type conversion_plan writes one tensor of a `part` in, in a GGUF file
// of `type`: `name` is the model's name for it, `file_name` the output's
// (the rules above). For a writer without a source to plan from
// (scripts/bench/cpp/make_random_gguf.cpp: random weights of a model too
// large to write in float first).
io::GgmlType gguf_tensor_type(Part part, const std::string& name, const std::string& file_name, const Shape& shape,
                              io::GgmlType type);

}  // namespace ditgen::models
