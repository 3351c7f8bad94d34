// The samplers by name (generate.scheduler), in one table: the config parses
// a name into a Sampler once, and make_scheduler, scheduler_names(), the
// messages and the files' metadata read names from here. kModelDefault
// ("") is the model's own scheduler_config.json class.
#pragma once
#include <string>

#include "util/enum_names.h"

namespace ditgen::sched {

enum class Sampler { kModelDefault, kDdim, kDpmpp2m, kUnipc, kEuler };

// stable-diffusion.cpp's sampler names; "" keeps the model's own.
inline constexpr EnumName<Sampler> kSamplerNames[] = {{Sampler::kModelDefault, ""},
                                                      {Sampler::kDdim, "ddim"},
                                                      {Sampler::kDpmpp2m, "dpmpp_2m"},
                                                      {Sampler::kUnipc, "unipc"},
                                                      {Sampler::kEuler, "euler"}};

inline std::string name_of(Sampler s) { return name_in(kSamplerNames, s); }

}  // namespace ditgen::sched
