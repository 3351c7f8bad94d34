// safetensors reading (mmap, fully validated header) and writing, and the
// WeightStore: the weights of one model part, from a directory of
// safetensors files or from one file (safetensors or GGUF).
// A file is mapped read-only once; tensors load in their stored dtype
// (F32, BF16, F16, I32, I64), borrowed in place (zero copy) when aligned for
// their element type, copied only when not: a bfloat16 checkpoint stays
// bfloat16 in memory, never widened here (conversion is the consumer's, once).
// The float8 types (F8_E4M3, F8_E5M2), which have no tensor dtype, decode to
// float32 at load, exactly as torch's .to(torch.float32).
// Every offset, size, dtype and shape in the header is checked against the
// file size before anything is read, so hostile files fail with ModelError
// naming the file and tensor, never a crash or an overread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "io/weight_edits.h"
#include "io/weight_file.h"
#include "tensor/tensor.h"

namespace ditgen::io {

class FileMap;

class SafetensorsFile final : public WeightFile {
 public:
  // Maps and validates; throws ModelError("<path>: ...") on any problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile() override;

  const std::string& path() const override { return path_; }
  bool contains(const std::string& name) const override { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const override;  // ModelError if absent
  std::vector<std::string> names() const override;                 // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The whole tensor in its stored dtype, borrowed in place when the data is
  // aligned for its element type (else copied into owned storage); float8
  // decoded to float32. Other stored types: ModelError naming the tensor and
  // its dtype.
  Tensor load(const std::string& name) const override;
  // Rows [row_begin, row_end) of the leading dimension, reading only those
  // bytes (tensor parallelism loads its own slices).
  Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const override;
  // Columns [col_begin, col_end) of a 2-D tensor, copied into owned storage
  // in the stored dtype (tensor parallelism's row-split layers). The file pages it read are
  // released from this process afterwards, so its resident memory holds only
  // the slice.
  Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const override;
  // Drops the file pages holding `name` from this process (madvise
  // MADV_DONTNEED on the read-only map): after a weight was converted or
  // uploaded, its source stops counting in this process's resident memory.
  // A tensor still borrowing those bytes stays valid: the pages fault back
  // in from the file when read.
  void release_pages(const std::string& name) const override;
  // The same for the bytes of `view`, a view of part of `name` (load or
  // load_rows); std::invalid_argument if it does not lie inside them.
  void release_pages(const std::string& name, const Tensor& view) const override;
  const uint8_t* bytes(const std::string& name) const override;

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

 private:
  SafetensorsFile() = default;
  // Rows [row_begin, row_end) of `ti` (a scalar counts as one row).
  Tensor load_rows_of(const TensorInfo& ti, int64_t row_begin, int64_t row_end, const Shape& out_shape) const;
  void release_pages_of(const TensorInfo& ti) const;
  std::string path_;
  std::unique_ptr<FileMap> map_;  // the whole file
  const uint8_t* data_ = nullptr;  // the data section: map + 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::weak_ptr<const SafetensorsFile> self_;  // lets borrowed tensors keep the map alive
};

// Writes CPU tensors, each in its own dtype, to `path` atomically (temporary
// name, then rename).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// One tensor of a file written by write_safetensors_streamed: its dtype and
// shape, and `fill`, which writes its bytes (numel x the dtype's size) at
// `out` when the file is written, so a converter holds one tensor at a time.
struct SafetensorsOutput {
  std::string name;
  DType dtype;
  Shape shape;
  std::function<void(uint8_t* out, uint64_t bytes)> fill;
};
// Called before each tensor's bytes are produced (a progress line).
using WriteProgress = std::function<void(size_t index, size_t count, const std::string& name)>;
// The same file as write_safetensors, its tensors produced one at a time.
void write_safetensors_streamed(const std::string& path, const std::vector<SafetensorsOutput>& tensors,
                                const std::map<std::string, std::string>& metadata = {},
                                const WriteProgress& progress = {});

// How WeightStore::open_file reads one file of weights.
struct SingleFileOptions {
  // The general.architecture a GGUF file must have when it names one ("wan"):
  // a GGUF of another model is refused (ModelError naming the file, the key,
  // both names). Files without the key (stable-diffusion.cpp writes none)
  // pass; their tensor names decide. Empty: any architecture.
  std::string architecture;
  // A prefix the tensor names may carry ("model.diffusion_model." in
  // ComfyUI and stable-diffusion.cpp checkpoints holding several parts):
  // when any name has it, the store holds only those tensors, under their
  // names without it (as ComfyUI-GGUF's loader strips it). Empty: none.
  std::string prefix;
  // Another naming the file may use (the original release's, as ComfyUI's
  // and the GGUF files keep it): when `other_naming_probe` (a name only that
  // naming has, prefix stripped: "blocks.0.self_attn.q.weight") is in the
  // file, every name goes through `rename` into the model's names, and a
  // name it does not know is a ModelError naming the file and that tensor
  // (a file of another model). Unset: names as stored.
  std::string other_naming_probe;
  std::function<std::optional<std::string>(const std::string&)> rename;
};

// The weights of one model part: a directory (e.g. <model>/transformer)
// holding a single `*.safetensors` file, or shards listed by
// `*.safetensors.index.json` (its weight_map validated: every shard exists
// and holds the tensors named), or one file of any format (open_file:
// safetensors or GGUF, told by its first bytes).
// Variant names as transformers and diffusers save them are found too:
// `model.fp16.safetensors`, or `model.safetensors.index.fp16.json` listing
// `model.fp16-00001-of-00002.safetensors` ...; a directory holding several
// candidates takes diffusion_pytorch_model / model without a variant, and
// is ambiguous (ModelError listing them) otherwise.
//
// Scaled float8 checkpoints (ComfyUI's convention): a checkpoint holding
// the marker tensor `scaled_fp8` or any `<layer>.scale_weight`, or whose
// file name says "scaled" while it holds float8 tensors, is scaled: every
// float8 `<layer>.weight` in it needs its `<layer>.scale_weight` (a float
// scalar, or one value per row: shape [rows] or [rows, 1]), else
// ModelError naming the file and both tensors. load(`<layer>.weight`) then
// returns float32 weight * scale, computed as ComfyUI's scaled_fp8_ops does
// (weight.to(float32) * scale_weight.to(float32)), for any weight that has
// a scale. `<layer>.scale_input` (ComfyUI's activation scale for fp8
// matrix products) plays no part in the weights.
class WeightStore {
 public:
  static WeightStore open_dir(const std::string& dir);
  static WeightStore open_file(const std::string& path, const SingleFileOptions& options = {});

  // The directory, or the file for open_file (messages name it).
  const std::string& dir() const { return dir_; }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // As the file describes the tensor (for a GGUF tensor, TensorInfo::type
  // is what load gives: io/weight_file.h).
  const TensorInfo& info(const std::string& name) const;  // ModelError if absent
  const std::string& file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  // WeightFile::load and its slices (io/weight_file.h), a scaled weight
  // multiplied by its scale.
  Tensor load(const std::string& name) const;
  Tensor load_rows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  Tensor load_cols(const std::string& name, int64_t col_begin, int64_t col_end) const;
  // A 2-D weight the GEMM reads in place in its blocks: rows [row_begin,
  // row_end) of a GGUF tensor of a block-quantized type (Q8_0, Q4_K, ...;
  // not F32 / F16 / BF16) as a Layout::kBlockQuantized tensor over the
  // file's bytes, computed in `arithmetic` (ops: float32 or bfloat16); none
  // for any other tensor (load / load_rows give those).
  std::optional<Tensor> load_block_rows(const std::string& name, int64_t row_begin, int64_t row_end,
                                        DType arithmetic) const;
  // Columns [col_begin, col_end) of such a weight (tensor parallelism's
  // row-split layers), copied out of the file: whole blocks only
  // (ConfigError, exit 2, naming the tensor, its block size and the split
  // otherwise); none for any other tensor.
  std::optional<Tensor> load_block_cols(const std::string& name, int64_t col_begin, int64_t col_end,
                                        DType arithmetic) const;
  // The same in float32, whatever the file holds: "this weight dequantized".
  Tensor load_f32(const std::string& name) const;
  Tensor load_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end) const;
  void release_pages(const std::string& name) const;  // WeightFile::release_pages
  void release_pages(const std::string& name, const Tensor& view) const;
  // The scale tensor applied to `name`, or null (scaled float8 checkpoints).
  const std::string* scale_of(const std::string& name) const;
  // Whether `t` is a view of `name`'s bytes in the file (borrowed by load
  // or load_rows), not a copy or a decoded tensor; answers without loading.
  bool points_into_file(const std::string& name, const Tensor& t) const;

  // Changes added to tensors as they load (io/weight_edits.h: LoRA merged
  // at load); null: none. An edited tensor loads as an owned float32 copy
  // of the part asked for, its change added; a block-quantized one is
  // refused (ConfigError: block_edit_refusal).
  void set_edits(std::shared_ptr<const WeightEdits> edits) { edits_ = std::move(edits); }
  const WeightEdits* edits() const { return edits_.get(); }
  // The low-rank changes a linear layer applies beside the weight `name` at
  // run time (WeightEdits::runtime_terms); none without edits.
  std::vector<LowRankTerm> runtime_terms(const std::string& name) const {
    return edits_ ? edits_->runtime_terms(name) : std::vector<LowRankTerm>{};
  }
  // Whether `name` is a 2-D GGUF tensor of a block type (what
  // load_block_rows hands out in its blocks).
  bool block_quantized(const std::string& name) const;
  // Why merging a change into such a tensor is refused (a ConfigError's
  // text, exit 2): it would need a float copy of it; a low-rank change is
  // applied beside it at run time instead (lora_apply "runtime").
  std::string block_edit_refusal(const std::string& name) const;

  // Checks that `name` exists with exactly `shape` and a type that loads as
  // a floating tensor (F32, BF16, F16, float8, a GGUF block type; ModelError
  // naming the file, the tensor, and expected vs found shape or type
  // otherwise).
  void expect(const std::string& name, const Shape& shape) const;

 private:
  struct Location {
    size_t file;       // index into files_
    std::string name;  // the tensor's name in that file
  };
  const Location& locate(const std::string& name) const;  // ModelError if absent
  // Finds the scales of a scaled float8 checkpoint (see above).
  void index_scales();
  // Rows [row_begin, row_end) of the scaled weight `name`, in float32.
  Tensor load_scaled(const std::string& name, int64_t row_begin, int64_t row_end) const;
  // `loaded` (rows from row_begin, columns from col_begin of `name`) with
  // its change added, when edits_ changes it; else `loaded` as it is.
  Tensor edited(const std::string& name, Tensor loaded, int64_t row_begin, int64_t col_begin) const;

  std::string dir_;
  std::vector<std::shared_ptr<const WeightFile>> files_;
  std::map<std::string, Location> where_;
  std::map<std::string, std::string> scales_;  // weight name -> its scale_weight's name
  std::string source_;                         // the single weights file or the index, for messages
  std::shared_ptr<const WeightEdits> edits_;
};

}  // namespace ditgen::io
