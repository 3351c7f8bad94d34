// The config's own enumerated settings as enums, each with its names in one
// table (util/enum_names.h): parsing (ObjectReader::enum_choice), messages,
// to_json and the files' metadata all read the table, so a value is parsed
// once, when the config is read, and the code that runs it compares enums,
// not strings. The scheduler's table is the scheduler layer's
// (sched/sampler.h), where the samplers are.
#pragma once
#include "util/enum_names.h"

namespace ditgen {

// output.format
enum class OutputFormat { kPng, kMp4 };
inline constexpr EnumName<OutputFormat> kOutputFormatNames[] = {{OutputFormat::kPng, "png"},
                                                                {OutputFormat::kMp4, "mp4"}};
inline const char* name_of(OutputFormat f) { return name_in(kOutputFormatNames, f); }

// model.quantize: what the transformer's float GEMM weights become at load.
enum class Quantize { kNone, kInt8 };
inline constexpr EnumName<Quantize> kQuantizeNames[] = {{Quantize::kNone, "none"}, {Quantize::kInt8, "int8"}};
inline const char* name_of(Quantize q) { return name_in(kQuantizeNames, q); }

// lora[i].target: which transformer of a model a LoRA file changes (a
// two-expert Wan 2.2 A14B has transformer and transformer_2).
enum class LoraTargetChoice { kTransformer, kTransformer2, kBoth };
inline constexpr EnumName<LoraTargetChoice> kLoraTargetNames[] = {{LoraTargetChoice::kTransformer, "transformer"},
                                                                   {LoraTargetChoice::kTransformer2, "transformer_2"},
                                                                   {LoraTargetChoice::kBoth, "both"}};
inline const char* name_of(LoraTargetChoice t) { return name_in(kLoraTargetNames, t); }

// lora_apply: merged into the weights at load, or applied beside them at
// run time, beside them (docs/lora.md).
enum class LoraApply { kMerge, kRuntime };
inline constexpr EnumName<LoraApply> kLoraApplyNames[] = {{LoraApply::kMerge, "merge"}, {LoraApply::kRuntime, "runtime"}};
inline const char* name_of(LoraApply a) { return name_in(kLoraApplyNames, a); }

// vae.tiling: when the VAE decodes in spatial tiles (docs/vae-tiling.md).
enum class VaeTiling { kAuto, kOn, kOff };
inline constexpr EnumName<VaeTiling> kVaeTilingNames[] = {
    {VaeTiling::kAuto, "auto"}, {VaeTiling::kOn, "on"}, {VaeTiling::kOff, "off"}};
inline const char* name_of(VaeTiling t) { return name_in(kVaeTilingNames, t); }

}  // namespace ditgen
