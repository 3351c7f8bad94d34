// parallel.sp_mode as an enum, parsed once when the config is read: its
// names live in one table (kSpModeNames) that the config parser, to_json,
// the layout strings and the errors read; the code that runs a layout
// compares enums. Header-only so the config layer can hold one without
// linking the parallel library.
#pragma once
#include <stdexcept>
#include <string>

#include "util/enum_names.h"

namespace ditgen::parallel {

// How the sp ranks share a sequence (docs/parallel.md): Ulysses (heads
// after an all-to-all), ring (keys and values passed round), dsp (frames,
// switched to tokens around the temporal attention; video models with a
// separate temporal attention only), naive_patch (each rank's tokens
// attend among themselves: an approximation). kAuto is a config's
// "auto", which resolve_sp_mode turns into one of the others per model.
enum class SpMode { kAuto, kUlysses, kRing, kDsp, kNaivePatch };

inline constexpr EnumName<SpMode> kSpModeNames[] = {{SpMode::kAuto, "auto"},
                                                    {SpMode::kUlysses, "ulysses"},
                                                    {SpMode::kRing, "ring"},
                                                    {SpMode::kDsp, "dsp"},
                                                    {SpMode::kNaivePatch, "naive_patch"}};

inline const char* name_of(SpMode mode) { return name_in(kSpModeNames, mode); }

// std::invalid_argument for a name not in the table.
inline SpMode sp_mode_of(const std::string& name) {
  for (const auto& entry : kSpModeNames)
    if (name == entry.name) return entry.value;
  throw std::invalid_argument("sp_mode \"" + name + "\" is not auto, ulysses, ring, dsp or naive_patch");
}

}  // namespace ditgen::parallel
