// A compute dtype as a run asks for it (model.dtype, model.vae_dtype,
// encode --dtype), parsed once into this enum; names in one table.
// What it resolves to on a device is resolve_dtype's rule, the one place
// "auto" and float16 on a CPU are decided (docs/design.md §2).
#pragma once
#include "util/enum_names.h"
#include "vocab/dtype.h"

namespace ditgen {

enum class DTypeChoice { kAuto, kFloat32, kBFloat16, kFloat16 };
inline constexpr EnumName<DTypeChoice> kDTypeChoiceNames[] = {{DTypeChoice::kAuto, "auto"},
                                                              {DTypeChoice::kFloat32, "float32"},
                                                              {DTypeChoice::kBFloat16, "bfloat16"},
                                                              {DTypeChoice::kFloat16, "float16"}};
// model.vae_dtype has no "auto": the VAE decodes in float32 unless told.
inline constexpr EnumName<DTypeChoice> kVaeDTypeChoiceNames[] = {{DTypeChoice::kFloat32, "float32"},
                                                                 {DTypeChoice::kBFloat16, "bfloat16"},
                                                                 {DTypeChoice::kFloat16, "float16"}};
inline const char* name_of(DTypeChoice c) { return name_in(kDTypeChoiceNames, c); }

// The dtype a choice computes in on `device`: auto is bfloat16 on CUDA and
// on CPUs with bfloat16 dot products (cpu_bf16: AVX512-BF16 or AMX),
// float32 elsewhere; float16 computes as float32 on a CPU (no float16
// arithmetic there; float16 weights stay float16 in memory).
constexpr DType resolve_dtype(DTypeChoice choice, Device device, bool cpu_bf16) {
  const bool cuda = device == Device::kCUDA;
  switch (choice) {
    case DTypeChoice::kAuto: return cuda || cpu_bf16 ? DType::kBF16 : DType::kF32;
    case DTypeChoice::kFloat32: return DType::kF32;
    case DTypeChoice::kBFloat16: return DType::kBF16;
    case DTypeChoice::kFloat16: return cuda ? DType::kF16 : DType::kF32;
  }
  return DType::kF32;
}

}  // namespace ditgen
