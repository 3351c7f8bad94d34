// The samplers, in one table: the enum, the name a config gives
// (generate.scheduler: stable-diffusion.cpp's sampler names), the kind of
// model each fits, the diffusers scheduler classes it implements (a
// scheduler_config.json's _class_name picks it) and its factory. The
// config parses a name into a Sampler once; the request carries the enum;
// make_scheduler, scheduler_names(), the messages and the files' metadata
// read this table. kModelDefault ("") is the model's own
// scheduler_config.json class, resolved through the same table.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/enum_names.h"

namespace ditgen::sched {

class Scheduler;
class SchedulerConfig;

enum class Sampler { kModelDefault, kDdim, kDpmpp2m, kUnipc, kEuler };

// What the model predicts, and so which samplers fit it.
enum class SchedulerKind {
  kDiffusion,  // epsilon / v / sample prediction on a beta schedule: ddim, dpmpp_2m
  kFlow,       // flow matching (velocity on sigmas from 1 to 0): unipc, euler
};

// A sampler built on a scheduler config; `shift` is generate.shift (flow
// samplers only: make_scheduler refuses it elsewhere).
using SchedulerFactory = std::unique_ptr<Scheduler> (*)(const SchedulerConfig& config, std::optional<double> shift);
std::unique_ptr<Scheduler> make_ddim(const SchedulerConfig& config, std::optional<double> shift);
std::unique_ptr<Scheduler> make_dpmpp_2m(const SchedulerConfig& config, std::optional<double> shift);
std::unique_ptr<Scheduler> make_unipc(const SchedulerConfig& config, std::optional<double> shift);
std::unique_ptr<Scheduler> make_euler(const SchedulerConfig& config, std::optional<double> shift);

struct SamplerRow {
  Sampler value;
  const char* name;
  SchedulerKind kind;                        // the models it fits (kModelDefault: its config's kind)
  std::array<const char*, 2> classes;        // diffusers' _class_name values it implements (null: none)
  SchedulerFactory make;                     // null for kModelDefault
};

// DDIMScheduler's row also takes CogVideoXDDIMScheduler configs: ddim
// runs them in DdimScheduler's CogVideoX form (sched/cogvideox_ddim.h).
inline constexpr SamplerRow kSamplers[] = {
    {Sampler::kModelDefault, "", SchedulerKind::kDiffusion, {nullptr, nullptr}, nullptr},
    {Sampler::kDdim, "ddim", SchedulerKind::kDiffusion, {"DDIMScheduler", "CogVideoXDDIMScheduler"}, &make_ddim},
    {Sampler::kDpmpp2m, "dpmpp_2m", SchedulerKind::kDiffusion, {"DPMSolverMultistepScheduler", nullptr},
     &make_dpmpp_2m},
    {Sampler::kUnipc, "unipc", SchedulerKind::kFlow, {"UniPCMultistepScheduler", nullptr}, &make_unipc},
    {Sampler::kEuler, "euler", SchedulerKind::kFlow, {"FlowMatchEulerDiscreteScheduler", nullptr}, &make_euler},
};

inline const SamplerRow& row_of(Sampler s) {
  for (const SamplerRow& r : kSamplers)
    if (r.value == s) return r;
  return kSamplers[0];
}
inline const char* name_of(Sampler s) { return row_of(s).name; }
// The sampler named `name` ("": kModelDefault); none for a name not in the table.
inline std::optional<Sampler> sampler_named(std::string_view name) { return value_in(kSamplers, name); }

}  // namespace ditgen::sched
